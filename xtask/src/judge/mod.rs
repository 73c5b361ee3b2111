//! Stage four, the judge: a boot's console log read once into its
//! verdict ([`verdict`]): the `TIERKIT-*` markers, KUnit's KTAP
//! ([`ktap`]), the kernel's reports ([`console`]), each line's `printk`
//! prefix ([`printk`]), and the flat list of results ([`records`]) that
//! every report writes; the facts of the boot ([`facts`]: accelerator,
//! kernel version, ...), decided once.

pub mod console;
pub mod facts;
pub mod ktap;
pub mod printk;
pub mod records;
pub mod verdict;
