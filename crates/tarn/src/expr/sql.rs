//! Parsing the SQL boolean expressions Delta tables store as text (CHECK constraints,
//! column invariants) into [`Expr`]: comparisons, `AND`/`OR`/`NOT`, `IS [NOT] NULL`,
//! `[NOT] IN`, `[NOT] BETWEEN`, `+ - * /`, parentheses, columns (dotted, or in
//! backquotes) and literals (integers, decimals, doubles with a `D` suffix, strings,
//! `TRUE`/`FALSE`/`NULL`), `CAST(x AS type)` and the functions [`Function`] names.
//! Anything else (other functions, `CASE`, `%`) is refused with
//! [`Error::InvalidExpression`], never guessed at.

use super::{ArithOp, CmpOp, ColumnName, Expr, Function, Scalar};
use crate::error::{Error, Result};
use crate::protocol::PrimitiveType;

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    /// A backquoted name: never a keyword.
    Quoted(String),
    Number(String),
    Text(String),
    Op(&'static str),
    LParen,
    RParen,
    Comma,
    Dot,
}

/// Parses Spark SQL expression text into an expression (unbound: bind it to a schema).
///
/// Fails with [`Error::InvalidExpression`] naming the text and what was not understood.
pub fn parse_sql(text: &str) -> Result<Expr> {
    let tokens = tokenize(text)?;
    let mut parser = Parser {
        text,
        tokens,
        at: 0,
    };
    let expr = parser.or()?;
    if parser.at < parser.tokens.len() {
        return Err(parser.error(format!("unexpected {:?}", parser.tokens[parser.at])));
    }
    Ok(expr)
}

fn invalid(text: &str, reason: String) -> Error {
    Error::InvalidExpression {
        expression: text.to_string(),
        reason,
    }
}

fn tokenize(text: &str) -> Result<Vec<Token>> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(Token::Ident(chars[start..i].iter().collect()));
            continue;
        }
        if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                i += 1;
            }
            // Spark's suffixes: L (long), D (double), BD (decimal).
            while i < chars.len() && chars[i].is_ascii_alphabetic() {
                i += 1;
            }
            out.push(Token::Number(chars[start..i].iter().collect()));
            continue;
        }
        if c == '\'' || c == '"' || c == '`' {
            let mut value = String::new();
            i += 1;
            loop {
                let Some(&d) = chars.get(i) else {
                    return Err(invalid(text, format!("unterminated {c}")));
                };
                i += 1;
                if d == c {
                    // A doubled quote stands for itself.
                    if chars.get(i) == Some(&c) {
                        value.push(c);
                        i += 1;
                        continue;
                    }
                    break;
                }
                if d == '\\' && c != '`' {
                    let Some(&e) = chars.get(i) else {
                        return Err(invalid(text, "unterminated escape".into()));
                    };
                    i += 1;
                    value.push(match e {
                        'n' => '\n',
                        't' => '\t',
                        other => other,
                    });
                    continue;
                }
                value.push(d);
            }
            out.push(match c {
                '`' => Token::Quoted(value),
                _ => Token::Text(value),
            });
            continue;
        }
        let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
        let op = match two.as_str() {
            "==" => Some("="),
            "!=" | "<>" => Some("!="),
            "<=" => Some("<="),
            ">=" => Some(">="),
            _ => None,
        };
        if let Some(op) = op {
            out.push(Token::Op(op));
            i += 2;
            continue;
        }
        out.push(match c {
            '=' => Token::Op("="),
            '<' => Token::Op("<"),
            '>' => Token::Op(">"),
            '+' => Token::Op("+"),
            '-' => Token::Op("-"),
            '*' => Token::Op("*"),
            '/' => Token::Op("/"),
            '(' => Token::LParen,
            ')' => Token::RParen,
            ',' => Token::Comma,
            '.' => Token::Dot,
            other => return Err(invalid(text, format!("unexpected character {other:?}"))),
        });
        i += 1;
    }
    Ok(out)
}

struct Parser<'a> {
    text: &'a str,
    tokens: Vec<Token>,
    at: usize,
}

impl Parser<'_> {
    fn error(&self, reason: String) -> Error {
        invalid(self.text, reason)
    }

    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn keyword(&self, word: &str) -> bool {
        matches!(self.peek(), Some(Token::Ident(w)) if w.eq_ignore_ascii_case(word))
    }

    fn eat_keyword(&mut self, word: &str) -> bool {
        let found = self.keyword(word);
        if found {
            self.at += 1;
        }
        found
    }

    fn expect_keyword(&mut self, word: &str) -> Result<()> {
        match self.eat_keyword(word) {
            true => Ok(()),
            false => Err(self.error(format!("expected {word}"))),
        }
    }

    fn eat(&mut self, token: &Token) -> bool {
        let found = self.peek() == Some(token);
        if found {
            self.at += 1;
        }
        found
    }

    fn or(&mut self) -> Result<Expr> {
        let mut left = self.and()?;
        while self.eat_keyword("OR") {
            left = Expr::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr> {
        let mut left = self.not()?;
        while self.eat_keyword("AND") {
            left = Expr::And(Box::new(left), Box::new(self.not()?));
        }
        Ok(left)
    }

    fn not(&mut self) -> Result<Expr> {
        if self.eat_keyword("NOT") {
            return Ok(Expr::Not(Box::new(self.not()?)));
        }
        self.predicate()
    }

    fn predicate(&mut self) -> Result<Expr> {
        let left = self.additive()?;
        if let Some(Token::Op(op)) = self.peek().cloned() {
            let cmp = match op {
                "=" => Some(CmpOp::Eq),
                "!=" => Some(CmpOp::NotEq),
                "<" => Some(CmpOp::Lt),
                "<=" => Some(CmpOp::LtEq),
                ">" => Some(CmpOp::Gt),
                ">=" => Some(CmpOp::GtEq),
                _ => None,
            };
            if let Some(op) = cmp {
                self.at += 1;
                let right = self.additive()?;
                return Ok(cmp_expr(op, left, right));
            }
        }
        if self.eat_keyword("IS") {
            let negated = self.eat_keyword("NOT");
            self.expect_keyword("NULL")?;
            return Ok(match negated {
                true => Expr::IsNotNull(Box::new(left)),
                false => Expr::IsNull(Box::new(left)),
            });
        }
        let negated = self.eat_keyword("NOT");
        if self.eat_keyword("IN") {
            if !self.eat(&Token::LParen) {
                return Err(self.error("expected ( after IN".into()));
            }
            let mut list = Vec::new();
            loop {
                match self.additive()? {
                    Expr::Literal(v) => list.push(v),
                    other => {
                        return Err(self.error(format!("IN lists only literals, not {other}")));
                    }
                }
                if self.eat(&Token::RParen) {
                    break;
                }
                if !self.eat(&Token::Comma) {
                    return Err(self.error("expected , or ) in IN list".into()));
                }
            }
            return Ok(Expr::InList {
                expr: Box::new(left),
                list,
                negated,
            });
        }
        if self.eat_keyword("BETWEEN") {
            let low = self.additive()?;
            self.expect_keyword("AND")?;
            let high = self.additive()?;
            let within = Expr::And(
                Box::new(cmp_expr(CmpOp::GtEq, left.clone(), low)),
                Box::new(cmp_expr(CmpOp::LtEq, left, high)),
            );
            return Ok(match negated {
                true => Expr::Not(Box::new(within)),
                false => within,
            });
        }
        if negated {
            return Err(self.error("expected IN or BETWEEN after NOT".into()));
        }
        Ok(left)
    }

    fn additive(&mut self) -> Result<Expr> {
        let mut left = self.multiplicative()?;
        loop {
            let op = match self.peek() {
                Some(Token::Op("+")) => ArithOp::Add,
                Some(Token::Op("-")) => ArithOp::Sub,
                _ => return Ok(left),
            };
            self.at += 1;
            let right = self.multiplicative()?;
            left = arith(op, left, right);
        }
    }

    fn multiplicative(&mut self) -> Result<Expr> {
        let mut left = self.unary()?;
        loop {
            let op = match self.peek() {
                Some(Token::Op("*")) => ArithOp::Mul,
                Some(Token::Op("/")) => ArithOp::Div,
                _ => return Ok(left),
            };
            self.at += 1;
            let right = self.unary()?;
            left = match op {
                // Spark's `/` divides as doubles, integers included (`div` truncates).
                ArithOp::Div => Expr::Call {
                    function: Function::Divide,
                    args: vec![left, right],
                },
                _ => arith(op, left, right),
            };
        }
    }

    fn unary(&mut self) -> Result<Expr> {
        if self.eat(&Token::Op("-")) {
            return Ok(match self.unary()? {
                Expr::Literal(v) => Expr::Literal(
                    negate(&v).ok_or_else(|| self.error(format!("cannot negate {v}")))?,
                ),
                other => arith(ArithOp::Sub, Expr::Literal(Scalar::Long(0)), other),
            });
        }
        self.eat(&Token::Op("+"));
        self.primary()
    }

    fn primary(&mut self) -> Result<Expr> {
        let Some(token) = self.peek().cloned() else {
            return Err(self.error("unexpected end".into()));
        };
        self.at += 1;
        match token {
            Token::LParen => {
                let inner = self.or()?;
                if !self.eat(&Token::RParen) {
                    return Err(self.error("expected )".into()));
                }
                Ok(inner)
            }
            Token::Number(text) => number(&text)
                .ok_or_else(|| self.error(format!("{text} is not a number Tarn reads"))),
            Token::Text(text) => Ok(Expr::Literal(Scalar::String(text))),
            Token::Ident(word) if word.eq_ignore_ascii_case("TRUE") => {
                Ok(Expr::Literal(Scalar::Boolean(true)))
            }
            Token::Ident(word) if word.eq_ignore_ascii_case("FALSE") => {
                Ok(Expr::Literal(Scalar::Boolean(false)))
            }
            Token::Ident(word) if word.eq_ignore_ascii_case("NULL") => {
                Ok(Expr::Literal(Scalar::Null))
            }
            Token::Ident(name) if self.peek() == Some(&Token::LParen) => {
                self.at += 1;
                self.call(&name)
            }
            Token::Ident(name) | Token::Quoted(name) => {
                let mut path = vec![name];
                while self.eat(&Token::Dot) {
                    match self.peek().cloned() {
                        Some(Token::Ident(n) | Token::Quoted(n)) => {
                            self.at += 1;
                            path.push(n);
                        }
                        _ => return Err(self.error("expected a name after .".into())),
                    }
                }
                Ok(Expr::Column(ColumnName::new(path)))
            }
            other => Err(self.error(format!("unexpected {other:?}"))),
        }
    }
}

impl Parser<'_> {
    /// A function call, after its name and `(`: `CAST(x AS type)` or `name(args...)`.
    fn call(&mut self, name: &str) -> Result<Expr> {
        if name.eq_ignore_ascii_case("CAST") {
            let value = self.or()?;
            self.expect_keyword("AS")?;
            let to = self.sql_type()?;
            self.expect(&Token::RParen)?;
            return Ok(Expr::Call {
                function: Function::Cast(to),
                args: vec![value],
            });
        }
        let function = Function::by_name(name)
            .ok_or_else(|| self.error(format!("function {name}(...) is not supported")))?;
        let mut args = Vec::new();
        if !self.eat(&Token::RParen) {
            loop {
                args.push(self.or()?);
                if self.eat(&Token::RParen) {
                    break;
                }
                self.expect(&Token::Comma)?;
            }
        }
        Ok(Expr::Call { function, args })
    }

    fn expect(&mut self, token: &Token) -> Result<()> {
        match self.eat(token) {
            true => Ok(()),
            false => Err(self.error(format!("expected {token:?}"))),
        }
    }

    /// A Spark SQL type name (`INT`, `BIGINT`, `DECIMAL(10, 2)`, `VARCHAR(20)`...).
    fn sql_type(&mut self) -> Result<PrimitiveType> {
        use PrimitiveType as P;
        let Some(Token::Ident(name)) = self.peek().cloned() else {
            return Err(self.error("expected a type after AS".into()));
        };
        self.at += 1;
        let mut params = Vec::new();
        if self.eat(&Token::LParen) {
            loop {
                match self.peek().cloned() {
                    Some(Token::Number(n)) => {
                        self.at += 1;
                        params.push(
                            n.parse::<u8>()
                                .map_err(|_| self.error(format!("{n} is not a type parameter")))?,
                        );
                    }
                    _ => return Err(self.error("expected a type parameter".into())),
                }
                if self.eat(&Token::RParen) {
                    break;
                }
                self.expect(&Token::Comma)?;
            }
        }
        let ty = match (name.to_ascii_lowercase().as_str(), params.as_slice()) {
            ("boolean", []) => P::Boolean,
            ("tinyint" | "byte", []) => P::Byte,
            ("smallint" | "short", []) => P::Short,
            ("int" | "integer", []) => P::Integer,
            ("bigint" | "long", []) => P::Long,
            ("float" | "real", []) => P::Float,
            ("double", []) => P::Double,
            ("string", []) | ("varchar" | "char", [_]) => P::String,
            ("binary", []) => P::Binary,
            ("date", []) => P::Date,
            ("timestamp" | "timestamp_ltz", []) => P::Timestamp,
            ("timestamp_ntz", []) => P::TimestampNtz,
            ("decimal" | "dec" | "numeric", []) => P::Decimal(10, 0),
            ("decimal" | "dec" | "numeric", [p]) => P::Decimal(*p, 0),
            ("decimal" | "dec" | "numeric", [p, s]) if (1..=38).contains(p) && s <= p => {
                P::Decimal(*p, *s as i8)
            }
            _ => return Err(self.error(format!("type {name} {params:?} is not one Tarn casts to"))),
        };
        Ok(ty)
    }
}

fn cmp_expr(op: CmpOp, left: Expr, right: Expr) -> Expr {
    Expr::Cmp {
        op,
        left: Box::new(left),
        right: Box::new(right),
    }
}

fn arith(op: ArithOp, left: Expr, right: Expr) -> Expr {
    Expr::Arith {
        op,
        left: Box::new(left),
        right: Box::new(right),
    }
}

fn negate(v: &Scalar) -> Option<Scalar> {
    Some(match v {
        Scalar::Long(x) => Scalar::Long(x.checked_neg()?),
        Scalar::Double(x) => Scalar::Double(-x),
        Scalar::Decimal(x, p, s) => Scalar::Decimal(x.checked_neg()?, *p, *s),
        _ => return None,
    })
}

/// A numeric literal as Spark types it: integers are longs (`L` too), `D` makes a
/// double, a point (or `BD`) a decimal of the digits written.
fn number(text: &str) -> Option<Expr> {
    let upper = text.to_ascii_uppercase();
    let (digits, suffix) = match upper.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => (&upper[..i], &upper[i..]),
        None => (upper.as_str(), ""),
    };
    let value = match suffix {
        "" if !digits.contains('.') => Scalar::Long(digits.parse().ok()?),
        "L" => Scalar::Long(digits.parse().ok()?),
        "D" => Scalar::Double(digits.parse().ok()?),
        "" | "BD" => {
            let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
            let scale = fraction.len();
            let unscaled: i128 = format!("{whole}{fraction}").parse().ok()?;
            let precision = (whole.trim_start_matches('0').len() + scale).clamp(1, 38);
            Scalar::Decimal(unscaled, precision.max(scale) as u8, scale as i8)
        }
        _ => return None,
    };
    Some(Expr::Literal(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(text: &str) -> String {
        parse_sql(text).unwrap().to_string()
    }

    #[test]
    fn constraints_spark_writes_parse() {
        assert_eq!(round_trip("id > 0"), "(id > 0)");
        assert_eq!(
            round_trip("id > 0 AND (name IS NOT NULL OR `weird col` <> 'x''y')"),
            parse_sql("id > 0 AND (name IS NOT NULL OR `weird col` != 'x''y')")
                .unwrap()
                .to_string()
        );
        assert!(matches!(
            parse_sql("price * 2 >= 10.5").unwrap(),
            Expr::Cmp {
                op: CmpOp::GtEq,
                ..
            }
        ));
        assert!(matches!(
            parse_sql("country IN ('NL', 'FR')").unwrap(),
            Expr::InList { negated: false, .. }
        ));
        assert!(matches!(
            parse_sql("a.b NOT BETWEEN -1 AND 1").unwrap(),
            Expr::Not(_)
        ));
        assert!(matches!(
            parse_sql("-1.25 < x").unwrap(),
            Expr::Cmp { left, .. } if *left == Expr::Literal(Scalar::Decimal(-125, 3, 2))
        ));
    }

    #[test]
    fn what_is_not_understood_is_refused_and_named() {
        for bad in [
            "levenshtein(name, 'x') > 2",
            "CAST(x AS interval)",
            "year(ts",
            "id >",
            "id > 0 0",
            "name = 'open",
            "id % 2 = 0",
            "CASE WHEN id > 0 THEN true END",
            "id NOT 3",
        ] {
            let err = parse_sql(bad).unwrap_err();
            assert!(
                matches!(&err, Error::InvalidExpression { expression, .. } if expression == bad),
                "{bad}: {err}"
            );
        }
    }
}
