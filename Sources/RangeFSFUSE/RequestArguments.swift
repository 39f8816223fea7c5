// The adapter's argument handling, apart from libfuse so that it is tested without a mount: READDIR's offsets and
// paging, the xattr size protocol, and who answers a READ that the kernel interrupts.

import Glibc
import RangeFSSystem

/// One page of READDIR(PLUS): entry n of [".", "..", children...] carries offset n + 1, the offset the kernel
/// passes back to continue after it.
struct DirectoryPage: Equatable {
    struct Row: Equatable {
        var offset: Int
        var name: String
        var inode: UInt64
        var isDirectory: Bool
        /// Which of the given children this row is; nil for "." and "..".
        var child: Int?
    }

    /// The file type bits of an entry (its `d_type`): a folder, a symlink (an archive's member) or a file.
    static func fileType(isDirectory: Bool, isSymlink: Bool) -> mode_t {
        isSymlink ? S_IFLNK : isDirectory ? S_IFDIR : S_IFREG
    }

    /// The smallest entry a buffer holds: a plain one takes at least 24 bytes, one with attributes about 152.
    static func minimumEntryBytes(plus: Bool) -> Int { plus ? 152 : 24 }

    /// Which children a READDIR at `offset` with a buffer of `bufferSize` bytes asks for: the index of the first
    /// one (the offset counts "." and ".." first) and, at most, as many as can fit, plus one to know it is full.
    static func children(offset: Int64, bufferSize: Int, plus: Bool) -> (from: Int, count: Int) {
        let first = max(0, Int(offset))
        return (max(0, first - 2), max(0, bufferSize) / minimumEntryBytes(plus: plus) + 1)
    }

    /// The rows to send from `offset` on: "." and ".." where the offset has not passed them, then `children`,
    /// each given as (position among the directory's children, name, inode, is a directory).
    static func rows(offset: Int64, directory: UInt64, parent: UInt64,
                     children: [(position: Int, name: String, inode: UInt64, isDirectory: Bool)]) -> [Row] {
        let first = max(0, Int(offset))
        var rows: [Row] = []
        if first == 0 { rows.append(Row(offset: 1, name: ".", inode: directory, isDirectory: true)) }
        if first <= 1 { rows.append(Row(offset: 2, name: "..", inode: parent, isDirectory: true)) }
        for (index, child) in children.enumerated() {
            rows.append(Row(offset: child.position + 3, name: child.name, inode: child.inode,
                            isDirectory: child.isDirectory, child: index))
        }
        return rows
    }
}

/// The xattr protocol (GETXATTR, LISTXATTR): a size of 0 asks how big the value is; a buffer too small for it
/// gets ERANGE; otherwise the value itself.
enum SizedAnswer: Equatable {
    case size(Int)
    case value([UInt8])
    case tooSmall(needed: Int)

    init(_ value: [UInt8], bufferSize: Int) {
        if bufferSize == 0 {
            self = .size(value.count)
        } else if bufferSize < value.count {
            self = .tooSmall(needed: value.count)
        } else {
            self = .value(value)
        }
    }
}

/// READs not answered yet. A READ may be answered by its completion or, if the kernel interrupts it (the reader
/// got a signal), at once with EINTR: whoever takes its ID first answers, and the other must not touch the
/// request, which libfuse frees with the reply.
struct PendingReads: ~Copyable, Sendable {
    private let state = LockedBox((nextID: UInt(1), waiting: Set<UInt>()))

    /// Registers a read that may wait; returns its ID (never 0, which the interrupt callback's data cannot carry).
    func begin() -> UInt {
        state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            state.waiting.insert(id)
            return id
        }
    }

    /// Claims the right to answer read `id`; false if it was answered already.
    func finish(_ id: UInt) -> Bool {
        state.withLock { $0.waiting.remove(id) != nil }
    }

    /// Reads registered and not answered.
    var count: Int { state.withLock { $0.waiting.count } }
}
