//! A SQLite VFS for the ingest connection that writes a commit's WAL frames with one `pwrite` at its sync,
//! instead of two per page (SQLite writes each frame's 24-byte header and its page apart).
//!
//! A one-report commit writes about 17 WAL frames. After the pause between two live reports on this VM, 34
//! writes of them took ~0.21 ms against ~0.07 ms for one write of the same bytes; in the archive's own commit
//! the gain is smaller but steady, 0.03-0.05 ms of a ~0.6 ms commit at the median (BENCHMARKS.md, issue 25).
//! The durability is SQLite's own: everything written goes out before the sync it precedes.
//!
//! Only the WAL file of a connection opened with this VFS is wrapped; every other file is the default VFS's
//! own. Writes to the WAL are gathered while each continues the last and go out, in order, before anything
//! that could look at the file: a sync, a read, a size, a truncation, a write elsewhere, the close, or
//! [`WRITE_MAX`] bytes. Other connections read the WAL only up to what a commit published after its sync, so
//! this is safe exactly when every commit syncs the WAL before SQLite publishes it: `synchronous=FULL`
//! (which the ingest connection sets and checks, `sqlite_ingest.rs`), and no padding of a commit to a
//! sector boundary after its sync, which SQLite does only when the file cannot overwrite in a power-safe way;
//! on such a file the writes pass straight through.

// A VFS is C function pointers over SQLite's own file objects: the one place the workspace allows `unsafe`
// (its `[workspace.lints]` deny it everywhere else).
#![allow(unsafe_code)]

use rusqlite::ffi;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::ptr;
use std::sync::OnceLock;

/// The VFS's registered name, as SQLite takes it and as rusqlite does.
const NAME_C: &CStr = c"osds-wal-batch";
const NAME: &str = match NAME_C.to_str() {
    Ok(name) => name,
    Err(_) => panic!("the VFS's name is UTF-8"),
};

/// The most bytes gathered into one write: the default VFS writes at most this much per call (it masks the
/// length to 17 bits; a longer write would come back short, as if the disk were full). A one-report commit
/// (~17 frames of 4 KiB) fits; a transaction of many frames goes out in writes of this size.
const WRITE_MAX: usize = 0x1ffff;

/// Registers the VFS once per process (it wraps the default VFS of the moment) and returns its name.
pub(crate) fn register() -> anyhow::Result<&'static str> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        // SAFETY: the default VFS is never unregistered in this process; the new VFS is leaked, so it lives as
        // long as SQLite may use it.
        .get_or_init(|| unsafe { register_once() })
        .clone()
        .map_err(anyhow::Error::msg)?;
    Ok(NAME)
}

/// The default VFS this one wraps (set once, before the VFS is registered).
static BASE: OnceLock<usize> = OnceLock::new();

fn base() -> *mut ffi::sqlite3_vfs {
    *BASE
        .get()
        .expect("the VFS is registered after its base is known") as *mut ffi::sqlite3_vfs
}

unsafe fn register_once() -> Result<(), String> {
    // SAFETY (whole function): plain calls into SQLite; the copied VFS keeps the base's own `pAppData`, so the
    // base's methods it shares see what they expect.
    let base = unsafe { ffi::sqlite3_vfs_find(ptr::null()) };
    if base.is_null() {
        return Err("SQLite has no default VFS".into());
    }
    BASE.set(base as usize)
        .map_err(|_| "the WAL-batching VFS is registered twice".to_string())?;
    let mut vfs = unsafe { *base };
    vfs.zName = NAME_C.as_ptr();
    vfs.pNext = ptr::null_mut();
    vfs.szOsFile = c_int::try_from(INNER_OFFSET + unsafe { (*base).szOsFile } as usize)
        .map_err(|_| "SQLite's file handle size is out of range".to_string())?;
    vfs.xOpen = Some(open);
    let rc = unsafe { ffi::sqlite3_vfs_register(Box::into_raw(Box::new(vfs)), 0) };
    if rc != ffi::SQLITE_OK {
        return Err(format!("registering the WAL-batching VFS failed ({rc})"));
    }
    Ok(())
}

/// A WAL file handle: SQLite's handle header, the default VFS's handle of the file (at [`INNER_OFFSET`] in
/// the same allocation) and the writes gathered so far.
#[repr(C)]
struct WalFile {
    header: ffi::sqlite3_file,
    inner: *mut ffi::sqlite3_file,
    /// Whether writes are gathered at all (see the module's note on padding).
    gather: bool,
    /// File offset of `pending[0]`.
    start: i64,
    pending: Vec<u8>,
}

/// Where the default VFS's handle starts in ours (SQLite's allocations are 8-byte aligned).
const INNER_OFFSET: usize = std::mem::size_of::<WalFile>().next_multiple_of(8);

unsafe extern "C" fn open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let base = base();
    // SAFETY: SQLite hands a handle of our `szOsFile` bytes; the base VFS gets a handle of at least its own size.
    unsafe {
        let base_open = (*base).xOpen.expect("the default VFS opens files");
        if flags & ffi::SQLITE_OPEN_WAL == 0 {
            return base_open(base, name, file, flags, out_flags);
        }
        let inner = file
            .cast::<u8>()
            .add(INNER_OFFSET)
            .cast::<ffi::sqlite3_file>();
        let rc = base_open(base, name, inner, flags, out_flags);
        if rc != ffi::SQLITE_OK {
            // SQLite closes a handle only through the methods it was given, and ours are not set.
            if !(*inner).pMethods.is_null() {
                ((*(*inner).pMethods).xClose.expect("files close"))(inner);
            }
            (*file).pMethods = ptr::null();
            return rc;
        }
        let characteristics = ((*(*inner).pMethods)
            .xDeviceCharacteristics
            .expect("files have characteristics"))(inner);
        ptr::write(
            file.cast::<WalFile>(),
            WalFile {
                header: ffi::sqlite3_file {
                    pMethods: &WAL_METHODS,
                },
                inner,
                gather: characteristics & ffi::SQLITE_IOCAP_POWERSAFE_OVERWRITE != 0,
                start: 0,
                pending: Vec::new(),
            },
        );
        ffi::SQLITE_OK
    }
}

static WAL_METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    // Version 1: SQLite maps memory and shared memory through the database file, never its WAL.
    iVersion: 1,
    xClose: Some(close),
    xRead: Some(read),
    xWrite: Some(write),
    xTruncate: Some(truncate),
    xSync: Some(sync),
    xFileSize: Some(file_size),
    xLock: Some(lock),
    xUnlock: Some(unlock),
    xCheckReservedLock: Some(check_reserved_lock),
    xFileControl: Some(file_control),
    xSectorSize: Some(sector_size),
    xDeviceCharacteristics: Some(device_characteristics),
    xShmMap: None,
    xShmLock: None,
    xShmBarrier: None,
    xShmUnmap: None,
    xFetch: None,
    xUnfetch: None,
};

/// Our handle behind SQLite's pointer to it.
///
/// SAFETY: `file` must be a handle `open` set up for a WAL file (true of every call through `WAL_METHODS`),
/// used by one thread at a time (SQLite's rule for a connection's files).
unsafe fn wal<'a>(file: *mut ffi::sqlite3_file) -> &'a mut WalFile {
    unsafe { &mut *file.cast::<WalFile>() }
}

impl WalFile {
    fn methods(&self) -> &ffi::sqlite3_io_methods {
        // SAFETY: the default VFS set the inner handle's methods when it opened it.
        unsafe { &*(*self.inner).pMethods }
    }

    /// Writes what is gathered, in one call. On failure the gathered bytes are dropped (SQLite treats the
    /// error as it would a failed write of them: the transaction does not commit).
    fn flush(&mut self) -> c_int {
        if self.pending.is_empty() {
            return ffi::SQLITE_OK;
        }
        let len = c_int::try_from(self.pending.len()).expect("gathered bytes stay below WRITE_MAX");
        // SAFETY: the buffer is valid for `len` bytes.
        let rc = unsafe { self.write_through(self.pending.as_ptr().cast(), len, self.start) };
        self.pending.clear();
        rc
    }

    /// One write straight to the default VFS's handle.
    ///
    /// SAFETY: `buf` must be readable for `amount` bytes.
    unsafe fn write_through(&self, buf: *const c_void, amount: c_int, offset: i64) -> c_int {
        // SAFETY: the inner handle is open; the caller vouches for the buffer.
        unsafe { (self.methods().xWrite.expect("files write"))(self.inner, buf, amount, offset) }
    }

    fn end(&self) -> i64 {
        self.start + self.pending.len() as i64
    }
}

unsafe extern "C" fn close(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: see `wal`; the handle is not used after this.
    unsafe {
        let wal = wal(file);
        let flushed = wal.flush();
        let closed = (wal.methods().xClose.expect("files close"))(wal.inner);
        ptr::drop_in_place(file.cast::<WalFile>());
        if flushed != ffi::SQLITE_OK {
            flushed
        } else {
            closed
        }
    }
}

unsafe extern "C" fn read(
    file: *mut ffi::sqlite3_file,
    buf: *mut c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    // SAFETY: see `wal`.
    let wal = unsafe { wal(file) };
    if !wal.pending.is_empty() && offset < wal.end() && offset + i64::from(amount) > wal.start {
        let rc = wal.flush();
        if rc != ffi::SQLITE_OK {
            return rc;
        }
    }
    // SAFETY: SQLite's arguments, passed on.
    unsafe { (wal.methods().xRead.expect("files read"))(wal.inner, buf, amount, offset) }
}

unsafe extern "C" fn write(
    file: *mut ffi::sqlite3_file,
    buf: *const c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    // SAFETY: see `wal`.
    let wal = unsafe { wal(file) };
    if !wal.gather {
        // SAFETY: SQLite's arguments, passed on.
        return unsafe { wal.write_through(buf, amount, offset) };
    }
    let Ok(len) = usize::try_from(amount) else {
        return ffi::SQLITE_IOERR_WRITE;
    };
    // SAFETY: SQLite passes `amount` readable bytes.
    let bytes = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) };
    // Anything but the next bytes (a frame SQLite writes again in place, within a large transaction) starts
    // a new run after the gathered one: writes reach the file in SQLite's order.
    if wal.pending.is_empty() || offset != wal.end() || wal.pending.len() + len > WRITE_MAX {
        let rc = wal.flush();
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        wal.start = offset;
    }
    if len > WRITE_MAX {
        // SAFETY: SQLite's arguments, passed on (the default VFS's own limit applies).
        return unsafe { wal.write_through(buf, amount, offset) };
    }
    wal.pending.extend_from_slice(bytes);
    ffi::SQLITE_OK
}

/// Our handle once what it gathered is written, or the error of that write.
///
/// SAFETY: as `wal`.
unsafe fn flushed<'a>(file: *mut ffi::sqlite3_file) -> Result<&'a mut WalFile, c_int> {
    let wal = unsafe { wal(file) };
    match wal.flush() {
        ffi::SQLITE_OK => Ok(wal),
        rc => Err(rc),
    }
}

// These three look at the file, so what is gathered goes out first (SAFETY: see `wal`; SQLite's arguments are
// passed on).

unsafe extern "C" fn truncate(file: *mut ffi::sqlite3_file, size: i64) -> c_int {
    match unsafe { flushed(file) } {
        Ok(wal) => unsafe { (wal.methods().xTruncate.expect("files truncate"))(wal.inner, size) },
        Err(rc) => rc,
    }
}

unsafe extern "C" fn sync(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    match unsafe { flushed(file) } {
        Ok(wal) => unsafe { (wal.methods().xSync.expect("files sync"))(wal.inner, flags) },
        Err(rc) => rc,
    }
}

unsafe extern "C" fn file_size(file: *mut ffi::sqlite3_file, size: *mut i64) -> c_int {
    match unsafe { flushed(file) } {
        Ok(wal) => unsafe { (wal.methods().xFileSize.expect("files have sizes"))(wal.inner, size) },
        Err(rc) => rc,
    }
}

// The rest only pass SQLite's arguments on to the default VFS's handle (SAFETY: see `wal`).

unsafe extern "C" fn lock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    let wal = unsafe { wal(file) };
    unsafe { (wal.methods().xLock.expect("files lock"))(wal.inner, level) }
}

unsafe extern "C" fn unlock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    let wal = unsafe { wal(file) };
    unsafe { (wal.methods().xUnlock.expect("files unlock"))(wal.inner, level) }
}

unsafe extern "C" fn check_reserved_lock(file: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    let wal = unsafe { wal(file) };
    unsafe { (wal.methods().xCheckReservedLock.expect("files lock"))(wal.inner, out) }
}

unsafe extern "C" fn file_control(
    file: *mut ffi::sqlite3_file,
    op: c_int,
    arg: *mut c_void,
) -> c_int {
    let wal = unsafe { wal(file) };
    unsafe { (wal.methods().xFileControl.expect("files take controls"))(wal.inner, op, arg) }
}

unsafe extern "C" fn sector_size(file: *mut ffi::sqlite3_file) -> c_int {
    let wal = unsafe { wal(file) };
    unsafe { (wal.methods().xSectorSize.expect("files have sectors"))(wal.inner) }
}

unsafe extern "C" fn device_characteristics(file: *mut ffi::sqlite3_file) -> c_int {
    let wal = unsafe { wal(file) };
    unsafe {
        (wal.methods()
            .xDeviceCharacteristics
            .expect("files have characteristics"))(wal.inner)
    }
}

#[cfg(test)]
mod tests {
    use rusqlite::{Connection, OpenFlags};
    use std::path::{Path, PathBuf};

    fn folder(what: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "osds-wal-batch-{what}-{}-{}",
            std::process::id(),
            osds_time::now_ms()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A connection through the VFS, as the ingest connection is set up, and a plain one reading beside it.
    fn pair(db: &Path) -> (Connection, Connection) {
        let batched = Connection::open_with_flags_and_vfs(
            db,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE,
            super::register().unwrap(),
        )
        .unwrap();
        batched
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get::<_, String>(0))
            .unwrap();
        batched.pragma_update(None, "synchronous", "FULL").unwrap();
        batched
            .execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
            .unwrap();
        (batched, Connection::open(db).unwrap())
    }

    fn body(id: i64, len: usize) -> Vec<u8> {
        (0..len).map(|i| (id as usize * 31 + i) as u8).collect()
    }

    /// `body(id, 900)` with its first half again in front.
    fn longer(id: i64) -> Vec<u8> {
        let mut bytes = body(id, 900);
        bytes.splice(0..0, body(id, 450));
        bytes
    }

    fn bodies_read_by(reader: &Connection) -> Vec<(i64, Vec<u8>)> {
        let mut rows = reader
            .prepare("SELECT id, body FROM t ORDER BY id")
            .unwrap();
        rows.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    fn intact(reader: &Connection) {
        let check: String = reader
            .query_row("PRAGMA integrity_check", [], |row| row.get(0))
            .unwrap();
        assert_eq!(check, "ok");
    }

    /// Each commit is in the WAL for other connections the moment it returns, the small ones (one write)
    /// and those larger than one write can carry.
    #[test]
    fn every_commit_is_read_by_another_connection_as_soon_as_it_returns() {
        let dir = folder("commits");
        let (batched, reader) = pair(&dir.join("t.db"));
        let mut expected = Vec::new();
        for id in 1..=60_i64 {
            // Every tenth commit carries ~1 MB: writes of at most `WRITE_MAX` bytes each.
            let rows = if id % 10 == 0 { 40 } else { 1 };
            let tx = batched.unchecked_transaction().unwrap();
            for n in 0..rows {
                let key = id * 100 + n;
                let bytes = body(key, 3000 + n as usize * 700);
                tx.execute("INSERT INTO t (id, body) VALUES (?1, ?2)", (key, &bytes))
                    .unwrap();
                expected.push((key, bytes));
            }
            tx.commit().unwrap();
            assert_eq!(bodies_read_by(&reader), expected, "after commit {id}");
        }
        intact(&reader);
        drop(batched);
        drop(reader);
        let _ = std::fs::remove_dir_all(dir);
    }

    /// A transaction bigger than the page cache writes frames before its commit and rewrites some of them
    /// in place, reading them back meanwhile; a rolled-back one leaves nothing. Both as without the VFS.
    #[test]
    fn spilled_rewritten_and_rolled_back_frames_keep_the_database_intact() {
        let dir = folder("spills");
        let (batched, reader) = pair(&dir.join("t.db"));
        batched.pragma_update(None, "cache_size", 10).unwrap();
        let tx = batched.unchecked_transaction().unwrap();
        for key in 1..=400_i64 {
            tx.execute(
                "INSERT INTO t (id, body) VALUES (?1, ?2)",
                (key, body(key, 900)),
            )
            .unwrap();
        }
        // The same pages again, within the same transaction.
        for key in 1..=400_i64 {
            tx.execute("UPDATE t SET body = ?2 WHERE id = ?1", (key, longer(key)))
                .unwrap();
        }
        // Frames spilled after a savepoint and undone: SQLite writes the next ones over them.
        for (round, undone) in [(0_i64, true), (1, true), (2, false)] {
            tx.execute_batch("SAVEPOINT s").unwrap();
            for key in 0..60 {
                let key = 2000 + round * 100 + key;
                tx.execute(
                    "INSERT INTO t (id, body) VALUES (?1, ?2)",
                    (key, body(key, 900 + round as usize)),
                )
                .unwrap();
            }
            tx.execute_batch(if undone {
                "ROLLBACK TO s; RELEASE s"
            } else {
                "RELEASE s"
            })
            .unwrap();
        }
        let kept: i64 = tx
            .query_row(
                "SELECT count(*) FROM t WHERE id >= 2000 AND length(body) = 902",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(kept, 60);
        tx.execute("DELETE FROM t WHERE id >= 2000", []).unwrap();
        tx.execute("UPDATE t SET body = ?1 WHERE id = 1", [longer(1)])
            .unwrap();
        let sum: i64 = tx
            .query_row("SELECT sum(length(body)) FROM t", [], |row| row.get(0))
            .unwrap();
        assert_eq!(sum, 400 * 1350);
        tx.commit().unwrap();

        let tx = batched.unchecked_transaction().unwrap();
        for key in 401..=800_i64 {
            tx.execute(
                "INSERT INTO t (id, body) VALUES (?1, ?2)",
                (key, body(key, 900)),
            )
            .unwrap();
        }
        tx.rollback().unwrap();
        batched
            .execute("INSERT INTO t (id, body) VALUES (1000, x'00')", [])
            .unwrap();

        let rows = bodies_read_by(&reader);
        assert_eq!(rows.len(), 401);
        for (key, bytes) in &rows[..400] {
            assert_eq!(bytes, &longer(*key), "row {key}");
        }
        assert_eq!(rows[400], (1000, vec![0]));
        intact(&reader);
        drop(batched);
        drop(reader);
        let _ = std::fs::remove_dir_all(dir);
    }
}
