//! tierkit's ABI from userspace: `/dev/tierkit` and its ioctls ([`tk`]),
//! the pre-cleared gigantic pool's debugfs files ([`pool`]), the time to
//! first use of a gigantic page, tierkit's against hugetlb's
//! ([`first_use`]), and the start of every test: tierkit loaded, the
//! topology and the weight files read ([`ready`]).

pub mod first_use;
pub mod pool;
pub mod ready;
pub mod tk;
