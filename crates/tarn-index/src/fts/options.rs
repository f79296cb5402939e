//! What the full-text index analyzes and how its tantivy schema looks: the options a
//! builder takes, the analyzer they make, and the fields every bundle holds.

use serde::{Deserialize, Serialize};
use tantivy::schema::{FAST, Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions};
use tantivy::tokenizer::{
    LowerCaser, RawTokenizer, RemoveLongFilter, SimpleTokenizer, TextAnalyzer, WhitespaceTokenizer,
};

use crate::Error;

pub(super) const TEXT_FIELD: &str = "text";
pub(super) const ADDRESS_FIELD: &str = "address";
pub(super) const TOKENIZER: &str = "tarn";
pub(super) const META_JSON: &str = "meta.json";
/// Memory tantivy's writer may use before it flushes a segment.
pub(super) const WRITER_MEMORY: usize = 64 * 1024 * 1024;

/// How text is split into tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tokenizer {
    /// Runs of letters and digits (the default).
    #[default]
    Simple,
    /// Runs of non-whitespace characters.
    Whitespace,
    /// The whole value is one token.
    Raw,
}

/// How a full-text index analyzes text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FullTextOptions {
    /// How text splits into tokens.
    pub tokenizer: Tokenizer,
    /// Whether tokens are lowercased (default yes).
    pub lowercase: bool,
    /// Tokens longer than this many bytes are dropped (default 40).
    pub max_token_len: usize,
}

impl Default for FullTextOptions {
    fn default() -> Self {
        Self {
            tokenizer: Tokenizer::Simple,
            lowercase: true,
            max_token_len: 40,
        }
    }
}

impl FullTextOptions {
    /// The analyzer these options describe: the same for indexing, for queries and for
    /// matching rows no index covers.
    pub fn analyzer(&self) -> TextAnalyzer {
        let limit = RemoveLongFilter::limit(self.max_token_len.max(1));
        match (self.tokenizer, self.lowercase) {
            (Tokenizer::Simple, true) => TextAnalyzer::builder(SimpleTokenizer::default())
                .filter(limit)
                .filter(LowerCaser)
                .build(),
            (Tokenizer::Simple, false) => TextAnalyzer::builder(SimpleTokenizer::default())
                .filter(limit)
                .build(),
            (Tokenizer::Whitespace, true) => TextAnalyzer::builder(WhitespaceTokenizer::default())
                .filter(limit)
                .filter(LowerCaser)
                .build(),
            (Tokenizer::Whitespace, false) => TextAnalyzer::builder(WhitespaceTokenizer::default())
                .filter(limit)
                .build(),
            (Tokenizer::Raw, true) => TextAnalyzer::builder(RawTokenizer::default())
                .filter(LowerCaser)
                .build(),
            (Tokenizer::Raw, false) => TextAnalyzer::builder(RawTokenizer::default()).build(),
        }
    }
}

pub(super) fn schema() -> (Schema, Field, Field) {
    let mut builder = Schema::builder();
    let indexing = TextFieldIndexing::default()
        .set_tokenizer(TOKENIZER)
        .set_index_option(IndexRecordOption::WithFreqsAndPositions);
    let text = builder.add_text_field(
        TEXT_FIELD,
        TextOptions::default().set_indexing_options(indexing),
    );
    let address = builder.add_u64_field(ADDRESS_FIELD, FAST);
    (builder.build(), text, address)
}

pub(super) fn engine(path: &str) -> impl Fn(tantivy::TantivyError) -> Error + '_ {
    move |e| Error::FullText {
        path: path.to_string(),
        reason: e.to_string(),
    }
}
