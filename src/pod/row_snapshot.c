/* See row_snapshot.h. */
#include "pod/row_snapshot.h"

#include <string.h>

#include "cxl/record_ops.h"
#include "pod/pod_int.h"
#include "pod/rowlock.h"
#include "storage/ebr.h"
#include "storage/table.h"

void pod_snapshot_enter(pod_db *db, int worker)
{
    ebr_enter(db->ebr, worker);
    if (db->pod) xebr_enter(db->pod->x, worker);
}

void pod_snapshot_exit(pod_db *db, int worker)
{
    if (db->pod) xebr_exit(db->pod->x, worker);
    ebr_exit(db->ebr, worker);
}

enum pod_snapshot_status pod_row_snapshot(pod_db *db, const pod_table *t, struct pod_row *row,
                                          uint64_t min_ev, void *tuple, uint64_t *epoch_version)
{
    struct pod_host *ph = db->pod;
    struct cxl_region *r = ph ? ph->r : NULL;
    bool in_cxl = false;
    if (!rowlock_try(r, row, ROWLOCK_READ, &in_cxl)) return POD_SNAP_BUSY;
    enum pod_snapshot_status st = POD_SNAP_ABSENT;
    /* A lock taken in the row's word keeps writers out wherever it moves
     * (the owner copies the readers into the record at move-in), and a row
     * whose word was live was not dirty in CXL memory (move-out copies a
     * dirty tuple back first): DRAM is current. In the record, DRAM is
     * current unless another host wrote the tuple there. */
    cxl_record *rec = in_cxl ? rowlock_record(r, row) : NULL;
    if (rec && (rec_load(rec) & REC_DIRTY)) {
        uint32_t valid = 0;
        uint64_t ev = 0;
        int rc = rec_row_read(r, ph->coh, rec, tuple, t->tuple_size, &valid, &ev);
        if (rc == REC_BUSY) {
            st = POD_SNAP_BUSY; /* its latch was taken (another reader): try again */
        } else if (rc != REC_OK) {
            st = POD_SNAP_ERROR;
        } else if (valid) {
            *epoch_version = ev;
            st = ev < min_ev ? POD_SNAP_OLDER : POD_SNAP_OK;
        }
    } else if (row_valid(row)) {
        *epoch_version = row->epoch_version;
        if (row->epoch_version < min_ev) {
            st = POD_SNAP_OLDER;
        } else {
            memcpy(tuple, row->tuple, t->tuple_size);
            st = POD_SNAP_OK;
        }
    }
    rowlock_release(r, row, ROWLOCK_READ, in_cxl);
    return st;
}
