# dm_cn_kill.sh under lotus (motor's records, the locks in the compute
# nodes' lock tables) on shm: a compute node killed in the middle of its
# commits, its lock table lost with it, leaves nothing locked, half-applied
# or lost; the survivor's janitor recovers it while it is down.
DM_KILL_PROTOCOL=lotus exec bash tests/integration/dm_cn_kill.sh
