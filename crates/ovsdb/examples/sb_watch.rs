//! Placeholder so the workspace manifest loads; overwrite freely.
fn main() {}
