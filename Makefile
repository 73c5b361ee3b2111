# SPDX-License-Identifier: GPL-2.0
# Build tierkit.ko without xtask against a configured and built kernel tree:
#
#   make KDIR=/path/to/linux                   # -> module/tierkit.ko
#   make KDIR=/path/to/linux TIERKIT_TEST=1    # with the test interfaces the
#                                              # userspace tests use (TK_IOC_WALK,
#                                              # TK_IOC_PAGE_REFS, debugfs test/)
#   make KDIR=/path/to/linux rust-analyzer     # -> module/rust-project.json
#   make KDIR=/path/to/linux clean
#
# KDIR must be the kernel's *output* directory (where .config and
# Module.symvers live; for O= builds that is the O= directory).
# `cargo xtask kernel` prints the KDIR of its cached build.
#
# A kernel built with clang (CONFIG_CC_IS_CLANG=y, as every Rust kernel built
# by xtask is) needs LLVM=1 for its modules too; it is set here when the
# kernel's .config says so, and Debian's /usr/lib/llvm-19/bin goes on PATH
# when it exists, so the plain command above works.
ifeq ($(KDIR),)
$(error KDIR is not set: make KDIR=/path/to/built/linux (see README.md))
endif
ifeq ($(wildcard $(KDIR)/.config),)
$(error $(KDIR) has no .config: point KDIR at a configured and built kernel (the O= directory of an O= build))
endif

ifneq ($(shell grep -s '^CONFIG_CC_IS_CLANG=y' $(KDIR)/.config),)
LLVM ?= 1
export LLVM
endif
ifneq ($(wildcard /usr/lib/llvm-19/bin),)
export PATH := /usr/lib/llvm-19/bin:$(PATH)
endif

all:
	$(MAKE) -C $(KDIR) M=$(CURDIR)/module

rust-analyzer:
	$(MAKE) -C $(KDIR) M=$(CURDIR)/module rust-analyzer

clean:
	$(MAKE) -C $(KDIR) M=$(CURDIR)/module clean

.PHONY: all rust-analyzer clean
