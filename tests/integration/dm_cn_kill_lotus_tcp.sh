# dm_cn_kill_lotus.sh over tcp;ofi_rxm (the lock requests too), three rounds,
# two in three killed at a random instant.
DM_KILL_PROTOCOL=lotus DM_KILL_PROVIDER="tcp;ofi_rxm" DM_KILL_ROUNDS=3 \
  exec bash tests/integration/dm_cn_kill.sh
