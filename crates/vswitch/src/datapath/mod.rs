//! The data path: PMD threads and the pipeline they run per burst (DESIGN.md §3).

pub mod pmd;
#[cfg(test)]
mod tests;
