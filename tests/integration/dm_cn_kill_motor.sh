# dm_cn_kill.sh under motor (records of several versions, snapshot reads) on
# shm: a compute node killed in the middle of its commits leaves nothing
# locked, half-applied or lost, and no version INVISIBLE.
DM_KILL_PROTOCOL=motor exec bash tests/integration/dm_cn_kill.sh
