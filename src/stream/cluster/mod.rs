//! The Kafka side of cluster mode (the decisions are `service::cluster`'s): the
//! changelog a shard's state is handed off through, the topology log that orders
//! the cluster's epochs, and the membership log of the nodes' heartbeats.

pub mod changelog;
pub mod membership;
pub mod topology_log;
