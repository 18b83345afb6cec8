//! Mutation testing and the tidy tests.
pub mod mutants;
#[cfg(test)]
mod tidy;
