# dm_cn_kill.sh over tcp;ofi_rxm (RMA and atomics on different paths, a
# WRITE complete once sent), three rounds: a compute node killed in the
# middle of its commits leaves nothing locked, half-applied or lost there
# too.
DM_KILL_PROVIDER="tcp;ofi_rxm" DM_KILL_ROUNDS=3 exec bash tests/integration/dm_cn_kill.sh
