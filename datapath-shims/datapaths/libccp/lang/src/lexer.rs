//! Tokens: parentheses and atoms, with positions. Comments (`#` to the end of the line) are
//! dropped here, so they are accepted anywhere — including before `(def`, which portus rejects.

use crate::error::Pos;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TokenKind {
    Open,
    Close,
    /// Any run of characters other than whitespace, parentheses and `#`: names, numbers,
    /// operators and keywords are told apart by the parser, which knows the context.
    Atom(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Token {
    pub kind: TokenKind,
    pub pos: Pos,
}

fn ends_atom(c: char) -> bool {
    c.is_whitespace() || c == '(' || c == ')' || c == '#'
}

/// Splits `src` into tokens. Lexing cannot fail: every character is whitespace, a parenthesis,
/// part of a comment, or part of an atom.
pub(crate) fn tokenize(src: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut pos = Pos { line: 1, column: 1 };
    let mut chars = src.chars().peekable();
    while let Some(c) = chars.next() {
        let here = pos;
        advance(&mut pos, c);
        match c {
            '(' => tokens.push(Token { kind: TokenKind::Open, pos: here }),
            ')' => tokens.push(Token { kind: TokenKind::Close, pos: here }),
            '#' => {
                while let Some(&next) = chars.peek() {
                    if next == '\n' {
                        break;
                    }
                    advance(&mut pos, next);
                    chars.next();
                }
            }
            c if c.is_whitespace() => {}
            c => {
                let mut atom = String::from(c);
                while let Some(&next) = chars.peek() {
                    if ends_atom(next) {
                        break;
                    }
                    atom.push(next);
                    advance(&mut pos, next);
                    chars.next();
                }
                tokens.push(Token { kind: TokenKind::Atom(atom), pos: here });
            }
        }
    }
    tokens
}

fn advance(pos: &mut Pos, c: char) {
    if c == '\n' {
        pos.line = pos.line.saturating_add(1);
        pos.column = 1;
    } else {
        pos.column = pos.column.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn atom(s: &str, line: u32, column: u32) -> Token {
        Token { kind: TokenKind::Atom(s.to_string()), pos: Pos { line, column } }
    }

    #[test]
    fn tokens_with_positions() {
        let toks = tokenize("(:= x\n  (+ x 1))");
        assert_eq!(
            toks,
            vec![
                Token { kind: TokenKind::Open, pos: Pos { line: 1, column: 1 } },
                atom(":=", 1, 2),
                atom("x", 1, 5),
                Token { kind: TokenKind::Open, pos: Pos { line: 2, column: 3 } },
                atom("+", 2, 4),
                atom("x", 2, 6),
                atom("1", 2, 8),
                Token { kind: TokenKind::Close, pos: Pos { line: 2, column: 9 } },
                Token { kind: TokenKind::Close, pos: Pos { line: 2, column: 10 } },
            ]
        );
    }

    #[test]
    fn comments_are_dropped_anywhere() {
        let toks = tokenize("# leading\n(a#tail (b))\n# trailing without newline");
        let kinds: Vec<_> = toks.into_iter().map(|t| t.kind).collect();
        assert_eq!(kinds, vec![TokenKind::Open, TokenKind::Atom("a".into())]);
    }

    #[test]
    fn columns_count_characters() {
        let toks = tokenize("(é x)");
        assert_eq!(toks[2], atom("x", 1, 4));
    }

    #[test]
    fn operators_and_literals_are_atoms() {
        let kinds: Vec<_> = tokenize("+infinity !if && >= :=").into_iter().map(|t| t.kind).collect();
        assert_eq!(
            kinds,
            ["+infinity", "!if", "&&", ">=", ":="].iter().map(|s| TokenKind::Atom(s.to_string())).collect::<Vec<_>>()
        );
    }
}
