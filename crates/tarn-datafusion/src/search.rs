//! `text_match(column, 'query')` in SQL: a full-text search a Tarn scan answers from the
//! column's full-text index. The filter is pushed into the scan; evaluated anywhere else
//! (a projection, a table that is not Tarn's) it is an error, since only the index
//! knows how the column's text was analyzed.

use arrow::datatypes::DataType;
use datafusion::common::{Result, plan_err};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

/// The SQL name of the full-text search function.
pub const TEXT_MATCH: &str = "text_match";

/// The `text_match` function, to register in a session
/// (`ctx.register_udf(text_match_udf())`); [`crate::register`] does it.
pub fn text_match_udf() -> ScalarUDF {
    ScalarUDF::new_from_impl(TextMatch {
        signature: Signature::any(2, Volatility::Immutable),
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct TextMatch {
    signature: Signature,
}

impl ScalarUDFImpl for TextMatch {
    fn name(&self) -> &str {
        TEXT_MATCH
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Boolean)
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        plan_err!(
            "text_match(column, 'query') is answered by a Tarn table's full-text index: use \
             it in the WHERE clause of a query on a Tarn table, on a column with a \
             full-text index"
        )
    }
}
