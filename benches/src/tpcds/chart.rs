//! The charts of `tarn-bench tpcds`: each engine's cumulative query time over the
//! queries every charted engine ran, so the gap between the lines is the gap in total
//! time and a steep step is a query where an engine loses time.

use std::path::Path;

use super::{EngineRuns, Query, QueryRun};
use crate::BenchError;
use crate::plot::{Chart, Series};

/// Writes the chart of `engines` (legend text and runs) over `queries` to `file`.
pub(super) fn cumulative(
    file: &Path,
    title: &str,
    queries: &[Query],
    engines: &[(&str, &EngineRuns)],
) -> Result<(), BenchError> {
    let ms = |engine: &EngineRuns, nr: u32| engine.runs.get(&nr).and_then(QueryRun::median);
    let common: Vec<u32> = queries
        .iter()
        .map(|q| q.nr)
        .filter(|nr| engines.iter().all(|(_, e)| ms(e, *nr).is_some()))
        .collect();
    let series = engines
        .iter()
        .map(|(name, engine)| {
            let mut total = 0.0;
            let points = common
                .iter()
                .enumerate()
                .map(|(i, nr)| {
                    total += ms(engine, *nr).unwrap_or(0.0) / 1e3;
                    ((i + 1) as f64, total)
                })
                .collect();
            Series {
                name: name.to_string(),
                points,
            }
        })
        .collect();
    let chart = Chart {
        title: title.to_string(),
        x_label: format!("queries run, in number order ({} in all)", common.len()),
        y_label: "cumulative median time, s".into(),
        log_x: false,
        log_y: false,
        series,
    };
    std::fs::write(file, chart.to_svg())?;
    println!("chart: {}", file.display());
    Ok(())
}
