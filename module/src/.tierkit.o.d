src/.tierkit.o.d: src/tierkit.rs src/../core/src/chunks.rs src/../core/src/interleave.rs src/../core/src/pace.rs src/../core/src/pool_cmd.rs src/../core/src/uapi.rs src/../core/src/wi_table.rs src/clear/mod.rs src/clear/bench.rs src/clear/gigantic.rs src/clear/placement.rs src/clear/pool.rs src/clear/range.rs src/clear/ready.rs src/clear/tests.rs src/debugfs.rs src/dev.rs src/mapping.rs src/mapping/tests.rs src/ratelimit.rs src/rebalance.rs src/shim.rs src/sync.rs src/wi/mod.rs src/wi/debugfs.rs src/wi/pages.rs src/wi/tests.rs /root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libcore.rmeta /root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libkernel.rmeta /root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libffi.rmeta /root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libcompiler_builtins.rmeta /root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libpin_init.rmeta /root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libpin_init_internal.so /root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libmacros.so /root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libbuild_error.rmeta /root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libzerocopy.rmeta /root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libbindings.rmeta /root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libzerocopy_derive.so /root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libuapi.rmeta

src/tierkit.o: src/tierkit.rs src/../core/src/chunks.rs src/../core/src/interleave.rs src/../core/src/pace.rs src/../core/src/pool_cmd.rs src/../core/src/uapi.rs src/../core/src/wi_table.rs src/clear/mod.rs src/clear/bench.rs src/clear/gigantic.rs src/clear/placement.rs src/clear/pool.rs src/clear/range.rs src/clear/ready.rs src/clear/tests.rs src/debugfs.rs src/dev.rs src/mapping.rs src/mapping/tests.rs src/ratelimit.rs src/rebalance.rs src/shim.rs src/sync.rs src/wi/mod.rs src/wi/debugfs.rs src/wi/pages.rs src/wi/tests.rs /root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libcore.rmeta /root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libkernel.rmeta /root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libffi.rmeta /root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libcompiler_builtins.rmeta /root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libpin_init.rmeta /root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libpin_init_internal.so /root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libmacros.so /root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libbuild_error.rmeta /root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libzerocopy.rmeta /root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libbindings.rmeta /root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libzerocopy_derive.so /root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libuapi.rmeta

src/tierkit.rs:
src/../core/src/chunks.rs:
src/../core/src/interleave.rs:
src/../core/src/pace.rs:
src/../core/src/pool_cmd.rs:
src/../core/src/uapi.rs:
src/../core/src/wi_table.rs:
src/clear/mod.rs:
src/clear/bench.rs:
src/clear/gigantic.rs:
src/clear/placement.rs:
src/clear/pool.rs:
src/clear/range.rs:
src/clear/ready.rs:
src/clear/tests.rs:
src/debugfs.rs:
src/dev.rs:
src/mapping.rs:
src/mapping/tests.rs:
src/ratelimit.rs:
src/rebalance.rs:
src/shim.rs:
src/sync.rs:
src/wi/mod.rs:
src/wi/debugfs.rs:
src/wi/pages.rs:
src/wi/tests.rs:
/root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libcore.rmeta:
/root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libkernel.rmeta:
/root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libffi.rmeta:
/root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libcompiler_builtins.rmeta:
/root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libpin_init.rmeta:
/root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libpin_init_internal.so:
/root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libmacros.so:
/root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libbuild_error.rmeta:
/root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libzerocopy.rmeta:
/root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libbindings.rmeta:
/root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libzerocopy_derive.so:
/root/.cache/tierkit/kernels/7.3.4-d596da39f3b1/rust/libuapi.rmeta:
