//! `chart`: the JSON lines of the level modes drawn as two SVG charts, throughput and
//! p50 latency against concurrency, one line per variant (operation, layout, indices,
//! entries, profile, group commit).

use std::collections::BTreeMap;
use std::path::Path;

use tarn_bench::plot::{Chart, Series};

use crate::levels::BoxError;

/// Reads the JSON lines at `json` and writes `<out>` (throughput) and `<out stem>-p50.svg`.
pub(crate) fn draw(json: &Path, out: &Path, mode: Option<&str>) -> Result<(), BoxError> {
    let text = std::fs::read_to_string(json)?;
    let mut throughput: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    let mut p50: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line)?;
        let kind = v["kind"]
            .as_str()
            .unwrap_or_else(|| v["mode"].as_str().unwrap_or(""));
        if mode.is_some_and(|m| m != kind) {
            continue;
        }
        let mut name = v["mode"].as_str().unwrap_or("?").to_string();
        for key in ["layout", "entries", "profile"] {
            match &v[key] {
                serde_json::Value::Null => {}
                serde_json::Value::String(s) => name.push_str(&format!(" {s}")),
                other => name.push_str(&format!(" {other}")),
            }
        }
        if v["indices"] == false {
            name.push_str(" no-indices");
        }
        if v["group_commit"] == false {
            name.push_str(" no-group-commit");
        }
        let workers = v["workers"].as_f64().unwrap_or(0.0);
        throughput
            .entry(name.clone())
            .or_default()
            .push((workers, v["throughput"].as_f64().unwrap_or(0.0)));
        p50.entry(name)
            .or_default()
            .push((workers, v["p50_ms"].as_f64().unwrap_or(0.0)));
    }
    if throughput.is_empty() {
        return Err(format!("no summaries in {}", json.display()).into());
    }
    let series = |m: BTreeMap<String, Vec<(f64, f64)>>| -> Vec<Series> {
        m.into_iter()
            .map(|(name, mut points)| {
                points.sort_by(|a, b| a.0.total_cmp(&b.0));
                Series { name, points }
            })
            .collect()
    };
    let title = mode.unwrap_or("all modes");
    let charts = [
        (
            out.to_path_buf(),
            Chart {
                title: format!("Throughput against concurrency ({title})"),
                x_label: "worker processes".into(),
                y_label: "operations per second".into(),
                log_x: true,
                log_y: false,
                series: series(throughput),
            },
        ),
        (
            out.with_file_name(format!(
                "{}-p50.svg",
                out.file_stem().and_then(|s| s.to_str()).unwrap_or("chart")
            )),
            Chart {
                title: format!("Median latency against concurrency ({title})"),
                x_label: "worker processes".into(),
                y_label: "p50 ms".into(),
                log_x: true,
                log_y: true,
                series: series(p50),
            },
        ),
    ];
    for (path, chart) in charts {
        std::fs::write(&path, chart.to_svg())?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
