# dm_cn_kill.sh under motor (records of several versions, snapshot reads):
# a compute node killed in the middle of its commits, on shm and then over
# tcp;ofi_rxm, leaves nothing locked, half-applied or lost, and no version
# INVISIBLE.
DM_KILL_PROTOCOL=motor bash tests/integration/dm_cn_kill.sh || exit 1
DM_KILL_PROTOCOL=motor DM_KILL_PROVIDER="tcp;ofi_rxm" DM_KILL_ROUNDS=3 \
  exec bash tests/integration/dm_cn_kill.sh
