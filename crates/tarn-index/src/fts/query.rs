//! Full-text queries: a small query language, its tree, and a matcher that evaluates the
//! tree on raw text with the index's own analyzer, so rows no index covers are judged
//! exactly as indexed ones.
//!
//! Syntax: words are terms, all of which must match (`quick fox`); `"quick brown fox"`
//! is a phrase (consecutive tokens); `OR` between two parts matches either; `AND` may be
//! written explicitly; `-word` or `NOT word` excludes; parentheses group. Terms are
//! analyzed like the indexed text (by default: split on non-alphanumeric characters and
//! lowercased), so a term that analyzes to several tokens is a phrase.

use tantivy::tokenizer::{TextAnalyzer, TokenStream};

use crate::{Error, Result};

/// A parsed full-text query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TextQuery {
    /// A term (analyzed; several tokens make a phrase).
    Term(String),
    /// Consecutive tokens.
    Phrase(String),
    /// Every part matches.
    And(Vec<TextQuery>),
    /// Any part matches.
    Or(Vec<TextQuery>),
    /// The part does not match.
    Not(Box<TextQuery>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Open,
    Close,
    Or,
    And,
    Not,
}

impl TextQuery {
    /// Parses the query language above.
    ///
    /// Fails with [`Error::InvalidInput`] for an empty query, unbalanced parentheses or
    /// quotes, or an operator without an operand.
    pub fn parse(text: &str) -> Result<TextQuery> {
        let tokens = lex(text)?;
        let mut at = 0;
        let query = parse_or(&tokens, &mut at)?;
        if at != tokens.len() {
            return Err(invalid(format!("unexpected {:?} in {text:?}", tokens[at])));
        }
        Ok(query)
    }

    /// Whether `text`, analyzed by `analyzer`, matches the query.
    pub fn matches(&self, analyzer: &TextAnalyzer, text: &str) -> bool {
        let tokens = analyze(analyzer, text);
        self.matches_tokens(analyzer, &tokens)
    }

    fn matches_tokens(&self, analyzer: &TextAnalyzer, tokens: &[String]) -> bool {
        match self {
            Self::Term(t) | Self::Phrase(t) => {
                let wanted = analyze(analyzer, t);
                !wanted.is_empty()
                    && tokens
                        .windows(wanted.len())
                        .any(|w| w.iter().zip(&wanted).all(|(a, b)| a == b))
            }
            Self::And(parts) => parts.iter().all(|p| p.matches_tokens(analyzer, tokens)),
            Self::Or(parts) => parts.iter().any(|p| p.matches_tokens(analyzer, tokens)),
            Self::Not(part) => !part.matches_tokens(analyzer, tokens),
        }
    }
}

impl std::fmt::Display for TextQuery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let join = |f: &mut std::fmt::Formatter<'_>, parts: &[TextQuery], op: &str| {
            f.write_str("(")?;
            for (i, p) in parts.iter().enumerate() {
                if i > 0 {
                    write!(f, " {op} ")?;
                }
                write!(f, "{p}")?;
            }
            f.write_str(")")
        };
        match self {
            Self::Term(t) => f.write_str(t),
            Self::Phrase(t) => write!(f, "\"{t}\""),
            Self::And(parts) => join(f, parts, "AND"),
            Self::Or(parts) => join(f, parts, "OR"),
            Self::Not(p) => write!(f, "-{p}"),
        }
    }
}

/// The tokens `analyzer` makes of `text`.
pub(crate) fn analyze(analyzer: &TextAnalyzer, text: &str) -> Vec<String> {
    let mut analyzer = analyzer.clone();
    let mut stream = analyzer.token_stream(text);
    let mut out = Vec::new();
    while stream.advance() {
        out.push(stream.token().text.clone());
    }
    out
}

fn invalid(reason: String) -> Error {
    Error::InvalidInput {
        reason: format!("full-text query: {reason}"),
    }
}

fn lex(text: &str) -> Result<Vec<Token>> {
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '(' => tokens.push(Token::Open),
            ')' => tokens.push(Token::Close),
            '"' => {
                let mut phrase = String::new();
                let mut closed = false;
                for c in chars.by_ref() {
                    if c == '"' {
                        closed = true;
                        break;
                    }
                    phrase.push(c);
                }
                if !closed {
                    return Err(invalid(format!("unclosed quote in {text:?}")));
                }
                tokens.push(Token::Quoted(phrase));
            }
            // A leading `-` excludes; one inside a word is part of it.
            '-' if chars.peek().is_some_and(|n| !n.is_whitespace()) => tokens.push(Token::Not),
            c => {
                let mut word = String::from(c);
                while let Some(n) = chars.peek() {
                    if n.is_whitespace() || matches!(n, '(' | ')' | '"') {
                        break;
                    }
                    word.push(*n);
                    chars.next();
                }
                tokens.push(match word.as_str() {
                    "OR" => Token::Or,
                    "AND" => Token::And,
                    "NOT" => Token::Not,
                    _ => Token::Word(word),
                });
            }
        }
    }
    if tokens.is_empty() {
        return Err(invalid("the query is empty".into()));
    }
    Ok(tokens)
}

fn parse_or(tokens: &[Token], at: &mut usize) -> Result<TextQuery> {
    let mut parts = vec![parse_and(tokens, at)?];
    while tokens.get(*at) == Some(&Token::Or) {
        *at += 1;
        parts.push(parse_and(tokens, at)?);
    }
    Ok(if parts.len() == 1 {
        parts.remove(0)
    } else {
        TextQuery::Or(parts)
    })
}

fn parse_and(tokens: &[Token], at: &mut usize) -> Result<TextQuery> {
    let mut parts = vec![parse_unary(tokens, at)?];
    loop {
        match tokens.get(*at) {
            Some(Token::And) => {
                *at += 1;
                parts.push(parse_unary(tokens, at)?);
            }
            Some(Token::Word(_) | Token::Quoted(_) | Token::Open | Token::Not) => {
                parts.push(parse_unary(tokens, at)?);
            }
            _ => break,
        }
    }
    Ok(if parts.len() == 1 {
        parts.remove(0)
    } else {
        TextQuery::And(parts)
    })
}

fn parse_unary(tokens: &[Token], at: &mut usize) -> Result<TextQuery> {
    let token = tokens
        .get(*at)
        .ok_or_else(|| invalid("an operator lacks its operand".into()))?;
    *at += 1;
    match token {
        Token::Not => Ok(TextQuery::Not(Box::new(parse_unary(tokens, at)?))),
        Token::Open => {
            let inner = parse_or(tokens, at)?;
            if tokens.get(*at) != Some(&Token::Close) {
                return Err(invalid("unbalanced parentheses".into()));
            }
            *at += 1;
            Ok(inner)
        }
        Token::Word(w) => Ok(TextQuery::Term(w.clone())),
        Token::Quoted(p) => Ok(TextQuery::Phrase(p.clone())),
        other => Err(invalid(format!("unexpected {other:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fts::FullTextOptions;

    #[test]
    fn queries_parse_and_match_raw_text() {
        let analyzer = FullTextOptions::default().analyzer();
        let q = TextQuery::parse("quick \"brown fox\" OR -lazy").unwrap();
        assert_eq!(
            q,
            TextQuery::Or(vec![
                TextQuery::And(vec![
                    TextQuery::Term("quick".into()),
                    TextQuery::Phrase("brown fox".into())
                ]),
                TextQuery::Not(Box::new(TextQuery::Term("lazy".into())))
            ])
        );
        assert!(q.matches(&analyzer, "The QUICK brown fox"));
        assert!(!q.matches(&analyzer, "the quick fox is brown and lazy"));
        assert!(q.matches(&analyzer, "nothing here"));
        let q = TextQuery::parse("(a OR b) AND c").unwrap();
        assert!(q.matches(&analyzer, "b, c!"));
        assert!(!q.matches(&analyzer, "a b"));
        assert!(TextQuery::parse("").is_err());
        assert!(TextQuery::parse("(a").is_err());
        assert!(TextQuery::parse("\"a").is_err());
        assert!(TextQuery::parse("a OR").is_err());
        // A term that analyzes to several tokens is a phrase.
        let q = TextQuery::parse("state-of-the-art").unwrap();
        assert!(q.matches(&analyzer, "a State of the Art design"));
        assert!(!q.matches(&analyzer, "the art state"));
    }
}
