// SPDX-License-Identifier: GPL-2.0
//! KUnit suites of the weighted-interleave code.
