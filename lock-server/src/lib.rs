//! lock-server: the HTTP lock service (contract C3).
//!
//! Layout:
//! - `store`: the [`store::Store`] trait every backend implements.

pub mod store;
