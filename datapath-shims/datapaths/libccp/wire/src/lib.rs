//! The libccp wire protocol: message types, a validating codec that never panics, and the
//! netlink framing ccp-kernel uses.
//!
//! Layouts follow libccp 1.2 (`serialize.h`): little-endian, an 8-byte header
//! `u16 type | u16 len | u32 sock_id`, then a type-specific body. [`codec`] documents the exact
//! layouts and the libccp quirks the codec guards against; [`netlink`] the 16-byte `nlmsghdr`.

pub mod codec;
pub mod msg;
pub mod netlink;
pub mod program;

pub use codec::*;
pub use msg::*;
pub use program::*;
