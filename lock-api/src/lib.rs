//! Wire types of the lock service's HTTP contract (C3, `docs/contracts/C3-http-surfaces.md`).
//!
//! Every JSON body that crosses the wire is defined here once and shared by the server
//! (`lock-server`), the SDK (`lock-wasm`) and the dashboard (`bench-ui`). The crate is serde
//! only, so it builds for `wasm32-unknown-unknown` too.
//!
//! Layout:
//! - [`session`]: L1 open, L2 heartbeat, L5 status bodies.
//! - [`lock`]: L4 acquire ([`LockGrant`], the only grant shape), L6 release, L7 advisory read.
//! - [`admin`]: R1 force revoke and its [`LockOutcome`] (R1 alone; never on an acquire path).
//! - [`watch`]: L8, the key's event stream ([`WatchEvent`]); L9's body is in [`lock`].
//! - [`ledger`]: the demo fenced resource standing for a payment rail, and its unfenced twin
//!   (a demonstration of what fencing prevents).
//! - [`error`]: the error body and [`ErrorCode`] with its retry verdict (C3 "Error codes").
//! - [`limits`]: the validation rules both sides apply (key shape, TTL and wait ranges).
//! - [`paths`]: the request paths, with keys and holder ids percent-encoded, and the session-id header.
//!
//! Request bodies reject unknown fields (`deny_unknown_fields`): a typo in a field name is a
//! 400 VALIDATION_FAILED, not a silently ignored option.

pub mod admin;
pub mod error;
pub mod ledger;
pub mod limits;
pub mod lock;
pub mod paths;
pub mod session;
pub mod watch;

pub use admin::{LockOutcome, RevokeRequest};
pub use error::{ErrorBody, ErrorCode, Unavailability};
pub use ledger::{LedgerAppend, LedgerEntries, LedgerEntry, UnfencedAppended};
pub use lock::{
    AcquireRequest, HoldKind, Holder, LockGrant, LockMode, LockState, ProclaimRequest,
    ReleaseRequest,
};
pub use session::{
    ChangeKind, HeartbeatRequest, HeartbeatResponse, HeldLock, HoldChange, LockStatus,
    OpenSessionRequest, SessionOpened, SessionStatus,
};
pub use watch::{EventBatch, EventKind, WatchEvent};
