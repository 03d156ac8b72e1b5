# dm_mn_kill.sh over tcp;ofi_rxm (RMA and atomics on different paths, a
# WRITE complete once sent), two rounds: a memory node killed in the middle
# of commits loses nothing acknowledged there either.
DM_MN_KILL_PROVIDER="tcp;ofi_rxm" DM_MN_KILL_VICTIMS="0 1" exec bash tests/integration/dm_mn_kill.sh
