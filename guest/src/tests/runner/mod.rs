//! Tests of /init's runner itself ([`crate::init::supervise`]): what it
//! does with a test that sleeps past its deadline ([`sleep`]), one that
//! leaves an orphan behind ([`orphan`]), and one stuck in an uninterruptible
//! wait ([`dwait`]), and one whose pages outlive its kill ([`release`]).

pub mod dwait;
pub mod orphan;
pub mod release;
pub mod sleep;
