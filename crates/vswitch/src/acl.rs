//! Stateless per-port ACL (issue 5): ordered rules over [`flowcache::FlowKey`] fields.
//! Being written; not yet used by the data path.
