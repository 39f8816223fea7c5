// What the open handles say about a file, for status, attributes and tests (OpenHandles.swift keeps them).

extension RangeFS {
    /// How many handles of `inode` the kernel reads itself (passthrough), and how many READs the daemon answered.
    func handleUsage(of inode: UInt64) -> (passthrough: Int, reads: Int) {
        handles.usage(of: inode)
    }

    /// The readahead window of `handle` in bytes (0 for a reader not seen to be sequential); nil if not open.
    package func readaheadWindow(of handle: UInt64) -> UInt64? {
        handles.readaheadWindow(of: handle)
    }

    /// Whether any handle is open on `inode`.
    func isOpen(_ inode: UInt64) -> Bool {
        handles.isOpen(inode)
    }
}
