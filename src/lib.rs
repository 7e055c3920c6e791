//! Host package for workspace-level benches, tests and examples.
