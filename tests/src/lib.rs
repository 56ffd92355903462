//! Harness for the end-to-end tests (to be built).
