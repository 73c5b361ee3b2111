# SPDX-License-Identifier: GPL-2.0
# Build tierkit.ko without xtask against a configured and built kernel tree:
#
#   make KDIR=/path/to/linux LLVM=1            # -> module/tierkit.ko
#   make KDIR=/path/to/linux LLVM=1 rust-analyzer
#
# KDIR must be the kernel's *output* directory (where .config and
# Module.symvers live; for O= builds that is the O= directory).
# `cargo xtask kernel` prints the KDIR of its cached build.
ifeq ($(KDIR),)
$(error KDIR is not set: make KDIR=/path/to/built/linux (see README.md))
endif

all:
	$(MAKE) -C $(KDIR) M=$(CURDIR)/module

rust-analyzer:
	$(MAKE) -C $(KDIR) M=$(CURDIR)/module rust-analyzer

clean:
	$(MAKE) -C $(KDIR) M=$(CURDIR)/module clean

.PHONY: all rust-analyzer clean
