//! The crate's one error type.

/// Everything that can fail in this crate. Every message reads as OVN 23.03
/// words it (`lib/lex.c`, `lib/expr.c`, `lib/actions.c`), so that an operator
/// who knows `ovn-trace` or `ovn-controller` logs recognises it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A lexical, syntax or type error in a match or actions string.
    /// `pos` is the byte offset of the token at which it was found.
    #[error("{message}")]
    Parse {
        /// Byte offset of the offending token in the input.
        pos: usize,
        /// OVN's wording, e.g. ``Syntax error at `x' expecting field name.``
        message: String,
    },
    /// A prerequisite or predicate of a symbol failed to parse or recursed
    /// (`expr_annotate()`: ``Error parsing expression `...' encountered as
    /// prerequisite or predicate of initial expression: ...``).
    #[error("{0}")]
    Annotate(String),
    /// An address set or port group reference could not be resolved, or its
    /// values do not fit the field (expr.c reports these while parsing, with
    /// the same words).
    #[error("{0}")]
    Resolve(String),
    /// A symbol table definition is invalid (unknown parent, bad bit range,
    /// duplicate name).
    #[error("{0}")]
    Symbol(String),
}

impl Error {
    /// The message alone, as OVN would print it.
    pub fn message(&self) -> &str {
        match self {
            Error::Parse { message, .. } => message,
            Error::Annotate(m) | Error::Resolve(m) | Error::Symbol(m) => m,
        }
    }
}

/// Shorthand for this crate's results.
pub type Result<T, E = Error> = std::result::Result<T, E>;
