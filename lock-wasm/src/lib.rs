//! Client SDK (to be built).
