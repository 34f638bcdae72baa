//! The engine's part of cluster mode (the decisions are `service::cluster`'s): a
//! shard's hand-off between nodes (fencing it, its export and import, the shards
//! this node holds) and sessions claimed across nodes.

pub mod handover;
pub mod session_claims;
