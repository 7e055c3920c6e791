//! OVN's logical flow languages: the `match` and `actions` columns of the
//! Southbound `Logical_Flow` table (ovn-sb(5)), as OVN 23.03 defines them,
//! so that a software switch can execute a logical pipeline the way
//! `ovn-trace` interprets it.
//!
//! - [`lex`]: the shared lexical syntax (`lib/lex.c`).
//! - [`symtab`]: the symbol table of `lib/logical-fields.c` as data, over
//!   the base [`Field`]s a [`Flow`] stores.
//! - [`expr`]: match expressions: parse, print, resolve address sets and
//!   port groups through a [`Context`], annotate (`lib/expr.c`).
//! - [`eval`]: an annotated expression compiled for evaluation on a
//!   [`Flow`], with its exact-match conjuncts exposed for indexing.
//! - [`actions`]: every action of `lib/actions.c`, parsed to a typed AST
//!   and printed back; [`dhcp`] holds the option tables they refer to.
//!
//! No I/O, no unsafe code.
//!
//! ```
//! use ovn_lflow::{CompiledExpr, Expr, Field, Flow, MapContext, SymbolTable};
//!
//! let symtab = SymbolTable::ovn();
//! let ctx = MapContext::new().with_port("vm1", 3);
//! let e = Expr::parse(r#"inport == "vm1" && tcp.dst == 80"#, &symtab)?;
//! let annotated = e.annotate(&symtab, &ctx)?;
//! assert_eq!(
//!     annotated.to_string(),
//!     r#"inport == "vm1" && tcp.dst == 0x50 && ip.proto == 0x6 && (eth.type == 0x800 || eth.type == 0x86dd)"#
//! );
//! let m = CompiledExpr::compile(&annotated, &ctx)?;
//! let flow = Flow::new()
//!     .with(Field::LogInport, 3)
//!     .with(Field::EthType, 0x0800)
//!     .with(Field::IpProto, 6)
//!     .with(Field::TcpDst, 80);
//! assert!(m.matches(&flow));
//! assert_eq!(m.exact(Field::LogInport), Some(3));
//! # Ok::<(), ovn_lflow::Error>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod actions;
pub mod dhcp;
pub mod error;
pub mod eval;
pub mod expr;
pub mod field;
pub mod flow;
pub mod lex;
pub mod symtab;

pub use actions::{Action, ActionParams, Actions, ParsedActions};
pub use error::{Error, Result};
pub use eval::{CompiledExpr, Conjunct, Test};
pub use expr::{AddressSet, Context, Expr, MapContext, Relop};
pub use field::Field;
pub use flow::Flow;
pub use symtab::{FieldRef, Subfield, Symbol, SymbolTable};
