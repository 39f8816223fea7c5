// The values the file system hands to the FUSE adapter, and its settings.

/// Attributes of one file or of the root directory.
public struct FileAttributes: Sendable, Equatable {
    public var inode: UInt64
    public var isDirectory: Bool
    public var size: UInt64
    /// Bytes present locally; `st_blocks` is this divided by 512, rounded up.
    public var cachedBytes: UInt64
    /// Seconds since 1970.
    public var modificationTime: Int64
    /// How long the kernel may keep these attributes and the name that led to them (0: ask every time).
    public var kernelCacheSeconds: Double = 0
    /// Permission bits of an archive's member (nil: read-only 0444 files, 0555 folders).
    package var mode: UInt32?
    /// An archive's member that is a symlink (`RangeFS.readLink`).
    package var isSymlink = false
}

/// Which files rangefs completes in the background.
public enum PrefetchPolicy: String, Sendable, CaseIterable {
    /// Only what readers ask for, plus readahead for sequential readers.
    case none
    /// Every file that is being used: once one handle has read `FileSystemSettings.fillAfterBytes` of it (a
    /// copy, a player that plays on), or pinned. A probe (a header, an index at the end, a few seeks: ffprobe, a
    /// thumbnailer, `file`) never starts a whole-file download, so a scan of many files fetches only what it
    /// reads. The fill goes on after the file is closed, at low priority.
    case use
    /// Every file once it has been opened; the fill goes on after it is closed, at low priority.
    case open
    /// Every mounted file, from the start.
    case all
}

/// How the file system behaves, with every default stated once; the command line's options take theirs from here.
/// More than 12 stored properties: a record, one field per setting of the file system, each with its default stated
/// once.
public struct FileSystemSettings: Sendable, Equatable {
    /// Block size for cache entries created by this mount.
    public var blockSize = 64 << 10
    /// How many bytes the probe of a listed file being opened asks for: the probe is then also its first data
    /// request, and a file this small costs one request in all (FirstBytes.swift). 0 probes with one byte.
    var openProbeBytes = 256 << 10
    /// Whether complete files are opened in FUSE passthrough mode when the kernel and privileges allow
    /// (`--passthrough auto|off`).
    public var passthrough = true
    /// A complete file from an earlier run at most this long has its blocks checked against their CRCs in one pass
    /// before its open is answered; a longer one is checked in the background (CacheEntry+OnePassCheck.swift). A
    /// few milliseconds of disk at most, about what the READs of such a file cost anyway.
    var openCheckBytes: UInt64 = 8 << 20
    /// The largest readahead window of a sequential reader.
    public var readaheadMaximum: UInt64 = 32 << 20
    /// Which files are completed in the background.
    public var prefetch = PrefetchPolicy.use
    /// With `.use`, the bytes one handle must read before its file is completed in the background: more than a
    /// media prober reads (ffprobe's probe size is 5 MB), less than 30% of a 100 MiB movie.
    var fillAfterBytes: UInt64 = 16 << 20
    /// An open re-probes its URL in the background when the last check is older than this; nil never.
    public var revalidateAfter: Duration? = .seconds(60)
    /// A directory visited again this long after its listing was read is listed again in the background: new files
    /// appear and removed ones go. The same lag as `revalidateAfter`, so a tree and its files are as fresh as
    /// each other; a directory nobody visits costs nothing.
    public var directoryCacheTime: Duration = .seconds(60)
    /// How long one directory listing may take, from its request to its last byte (`--listing-timeout`,
    /// ListingDeadline.swift); a server that sends slower than the low-speed floor is ended sooner. Ten minutes:
    /// the largest listing read (128 MiB, a million entries) arrives in that time at 220 KB/s, and a listing of
    /// 100,000 files (about 10 MB of HTML) at 17 KB/s, so only a server that sends without end, or a huge
    /// directory on a link slower than that, reaches it; and it bounds how long `rangefs mount` can wait for
    /// the listing of its directory URL.
    public var listingTimeout: Duration = .seconds(600)
    /// How many directories are listed ahead at once for the whole mount while a reader walks a tree (`ls -lR`,
    /// `find`, `du`; DirectoryService+WalkAhead.swift); 0 lists nothing ahead. Three quarters of the connections
    /// per host, at most 12, so a reader's own request always finds a connection.
    var walkAheadListings = 12

    /// Whether the next files of a directory that a reader opens in listing order are fetched ahead of it
    /// (`--dir-prefetch on|off`, DirectoryPrefetch.swift). It sizes its depth for `FetchPolicy.maxTransfers`
    /// connections (`--connections`, as many as `--connections-per-host` by default), and leaves two to readers.
    public var directoryPrefetch = true

    /// Whether files named .zip, .tar, .tar.gz/.tgz or .iso show as folders of their members (`--archives`,
    /// RangeFS+Archives.swift).
    /// (A list-file line ending in `archives` marks one URL instead: RangeFS.showArchives(of:).)
    package var archives = false

    /// The defaults, for a fetcher that opens up to `connectionsPerHost` connections to one server.
    public init(connectionsPerHost: Int = 16) {
        walkAheadListings = min(12, max(1, connectionsPerHost * 3 / 4))
    }
}

/// What `open` hands back to the adapter.
public struct OpenedFile: Sendable, Equatable {
    public var handle: UInt64
    /// Whether pages the kernel cached for this inode are still valid. False after the remote file changed, so
    /// the kernel drops the old version's pages.
    public var keepCache: Bool
    /// Whether every read must come to the file system, past the size the kernel knows: a file whose size shows
    /// only at the end of its stream.
    public var directIO = false
    /// For a passthrough open: the complete, committed data file the kernel is to read itself. The FUSE adapter
    /// opens it as the handle's backing file; if it cannot, it calls `RangeFS.passthroughFailed`.
    public var passthroughFile: String?
}

/// Whether the kernel reads complete files itself (FUSE passthrough), and why not when it does not.
public enum PassthroughMode: Sendable, Equatable {
    /// Not known yet: the kernel has not initialised the session.
    case pending
    case on
    case off(String)

    public var description: String {
        switch self {
        case .pending: "not negotiated yet"
        case .on: "on: complete files are read by the kernel from the cache, past the daemon"
        case .off(let why): "off: \(why)"
        }
    }
}
