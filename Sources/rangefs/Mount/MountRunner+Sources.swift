// What a mount is made of, before anything is mounted: the sources given (command line, list files) and saved
// with the cache, the credentials that leave their URLs, and the probes and listings that decide which of them
// mount, which are served from the cache alone, and which are reported as failed.

import FoundationEssentials
import Glibc
import RangeFSCache
import RangeFSCatalog
import RangeFSFetch
import RangeFSFileSystem
import RangeFSSystem

extension MountRunner {
    /// The URLs of the command line, then those of the list files, in order.
    func givenSources() throws -> [MountSource] {
        do {
            var sources = try urls.map { url throws(MountSourceError) in try MountSource(parsing: url) }
            for path in configuration.listFiles {
                guard let data = FileManager.default.contents(atPath: path) else {
                    throw Failure("cannot read list file \(path); check the path and its permissions")
                }
                sources += try MountSource.parseList(String(decoding: data, as: UTF8.self), path: path)
            }
            if let checksum = configuration.checksum {
                guard MountSource.isChecksum(checksum) else {
                    throw Failure("--checksum \(MountSource.checksumProblem(checksum))")
                }
                guard sources.count == 1, !sources[0].url.hasSuffix("/") else {
                    throw Failure("--checksum gives the digest of one file, but \(sources.count) URLs are given; "
                                  + "put sha256=HEX after each URL in a list file instead")
                }
                sources[0].checksum = checksum.lowercased()
            }
            return sources
        } catch let error as MountSourceError {
            throw Failure(error.message)
        }
    }

    /// The credentials of this mount: those saved with the cache, the user and password of each given URL
    /// (which leave the URL), and the given headers for the origins of the given URLs. Saved again if changed.
    func loadCredentials(for sources: inout [MountSource], store: CacheStore) throws -> CredentialTable {
        let saved: [String: OriginCredentials]
        do {
            saved = try SavedCredentials(cacheRoot: store.root).load()
        } catch {
            throw Failure("\(store.root)/credentials.json is damaged (\(error)); remove it and mount with the "
                          + "credentials again")
        }
        let credentials = CredentialTable(saved)
        let environment = ProcessInfo.processInfo.environment
        let missingKeys = try ObjectStoreSettings.resolve(configuration.objectStore, environment: environment,
                                                          home: environment["HOME"] ?? "/root").apply(to: credentials)
        for line in missingKeys { printError("rangefs: " + line) }
        for index in sources.indices {
            sources[index].url = adopt(sources[index].url, into: credentials, store: store)
            sources[index].mirrors = sources[index].mirrors.map { credentials.adopt($0).url }
        }
        if !configuration.headers.isEmpty {
            for source in sources { credentials.setHeaders(configuration.headers, for: source.url) }
        }
        if credentials.snapshot != saved { try SavedCredentials(cacheRoot: store.root).save(credentials.snapshot) }
        return credentials
    }

    /// `full` without its `user:password@` and its query's values, which go to `credentials`; the cached data an
    /// older rangefs stored under the whole URL moves to the URL's identity.
    func adopt(_ full: String, into credentials: CredentialTable, store: CacheStore, replacing: Bool = true) -> String {
        let url = credentials.adopt(full, replacing: replacing).url
        guard full != url else { return url }
        do {
            try store.moveEntry(from: full, to: url)
        } catch {
            printError("rangefs: cannot move the cache entry of \(Redaction.redact(full)) to its URL without the "
                       + "credentials (\(error)); its data is fetched again")
        }
        return url
    }

    /// Adds the files saved with the cache (added at runtime, or mounted before) that `sources` lacks; returns
    /// what was saved. A damaged list is moved aside, never overwritten. A saved URL with `user:password@` or a
    /// query (saved by an older rangefs) gives them to `credentials`, and is saved again as its identity.
    func addSavedFiles(of savedSet: SavedSet, store: CacheStore, to sources: inout [MountSource],
                       credentials: CredentialTable) -> [SavedFile] {
        do {
            var saved = try savedSet.files()
            var adopted = false
            // What was given this time, or kept in credentials.json, wins over what an older catalog holds.
            for index in saved.indices {
                let url = adopt(saved[index].url, into: credentials, store: store, replacing: false)
                let mirrors = saved[index].mirrors?.map { credentials.adopt($0, replacing: false).url }
                guard url != saved[index].url || mirrors != saved[index].mirrors else { continue }
                saved[index].url = url
                saved[index].mirrors = mirrors
                adopted = true
            }
            if adopted {
                do {
                    try SavedCredentials(cacheRoot: store.root).save(credentials.snapshot)
                    try savedSet.save { saved }
                } catch {
                    printError("rangefs: cannot save the credentials apart from the URLs in \(store.root): \(error)")
                }
            }
            for file in saved where !sources.contains(where: { $0.url == file.url }) {
                // A directory mounted as the root is saved without a name.
                var source = MountSource(url: file.url, name: file.name.isEmpty ? nil : file.name,
                                         mirrors: file.mirrors ?? [], checksum: file.checksum)
                source.archives = file.archives ?? false
                sources.append(source)
            }
            return saved
        } catch {
            let path = "\(store.root)/catalog.json"
            do {
                let aside = try savedSet.setAsideDamaged()
                printError("rangefs: \(path) is damaged (\(error)); kept it as \(aside) and mounting only the given "
                           + "URLs; add its URLs again with rangefs add")
            } catch let renaming {
                printError("rangefs: \(path) is damaged (\(error)) and cannot be moved aside (\(renaming)); "
                           + "move it away, then mount again")
            }
            return []
        }
    }

    /// What probing the sources gave: the catalog of the files to mount, those served from the cache alone
    /// (URL and why), the saved files that cannot be mounted but stay saved, and how many failed.
    struct Probed {
        let catalog = Catalog()
        var offline: [String: String] = [:]
        /// The saved files not mounted this run, which stay saved.
        var unmounted: [SavedFile] = []
        /// Every URL that could not be mounted, reported once the mount knows whether it goes ahead.
        var unmountable: [Unmountable] = []
        /// The mounted files that have mirrors (given, or named by their server's Link headers) or a given digest,
        /// with what was given for each.
        var configured: [(RemoteMetadata, MountSource)] = []
    }

    /// A URL that could not be mounted, and why.
    struct Unmountable {
        let shown: String
        let reason: String
        let name: String
        /// Whether it stays in the saved set if the mount goes ahead (its server was unreachable, or it was
        /// saved before and the server did not say it is gone).
        let keepSaved: Bool
        let wasSaved: Bool
    }

    /// Probes every URL at once; a bad one is reported by name and the rest still mount. A URL whose server
    /// cannot be reached mounts from its cache entry if it has one. One that cannot be mounted stays in the
    /// saved set if its server was unreachable, or if it was saved before and the server did not say it is gone
    /// (a 403 may be an expired token; only `rangefs rm` or a 404/410 drops a saved URL).
    func probe(_ sources: [MountSource], with fetcher: RangeFetching, store: CacheStore,
                       saved: Set<String>) -> Probed {
        var probed = Probed()
        // Directory URLs are listed on their first visit, not probed: the only one is the root, as with httpdirfs
        // and rclone; among other sources, or named, each is a folder.
        // A URL without the `/` is a directory too when its server redirects it to the URL with one.
        var directories = sources.filter { $0.url.hasSuffix("/") }
        let files = sources.filter { !$0.url.hasSuffix("/") }
        for (source, result) in zip(files, fetcher.probeAll(files.map(\.url)).map { $0.map(store.settled) }) {
            let shown = Redaction.redact(source.url)
            switch ProbeOutcome.judge(result, stored: { store.storedMetadata(for: source.url) },
                                      wasSaved: saved.contains(source.url)) {
            case .directory(let url):
                directories.append(MountSource(url: url, name: source.name))
            case .online(let metadata):
                add(metadata, as: source.name, to: probed.catalog)
                if !source.mirrors.isEmpty || source.checksum != nil || configuration.mirrorsFromLinks {
                    probed.configured.append((metadata, source))
                }
            case .offline(let stored, let reason):
                add(stored, as: source.name, to: probed.catalog)
                if !source.mirrors.isEmpty || source.checksum != nil { probed.configured.append((stored, source)) }
                probed.offline[source.url] = reason
                printError("rangefs: \(shown): \(reason); serving what is cached until it answers")
            case .gone(let error), .failed(let error, keepSaved: false):
                probed.unmountable.append(Unmountable(shown: shown, reason: error.userMessage, name: "",
                                                      keepSaved: false, wasSaved: saved.contains(source.url)))
            case .failed(let error, keepSaved: true):
                let name = source.name ?? EntryNaming.preferredName(
                    explicit: nil, metadata: RemoteMetadata(url: source.url, size: 0, etag: "", lastModified: ""))
                probed.unmounted.append(SavedFile(name: name, url: source.url, archives: source.archives ? true : nil))
                probed.unmountable.append(Unmountable(shown: shown, reason: error.userMessage, name: name,
                                                      keepSaved: true, wasSaved: saved.contains(source.url)))
            }
        }
        if sources.count == 1, let only = directories.first, only.name == nil {
            probed.catalog.setRootURL(only.url)
        } else {
            for directory in directories { probed.catalog.addDirectory(url: directory.url, explicitName: directory.name) }
        }
        return probed
    }

    /// Lists every directory URL before the mount goes ahead, so that one that cannot be listed (404, a server
    /// that is down, an answer that is no listing) is reported like a bad file URL, and taken out of the mount.
    /// One whose server is down but whose listing was kept from an earlier visit mounts from that listing.
    func listDirectories(of fileSystem: RangeFS, saved: Set<String>, into probed: inout Probed) {
        for (directory, outcome) in fileSystem.listDirectorySources() {
            let url = directory.url ?? ""
            let shown = Redaction.redact(url)
            switch outcome {
            case .listed:
                continue
            case .kept(let reason):
                printError("rangefs: \(shown): \(reason); showing the listing kept from an earlier visit until it answers")
            case .failed(let reason, let gone):
                let name = directory.inode == Catalog.rootInode ? "" : directory.name
                let keepSaved = saved.contains(url) ? !gone : false
                if keepSaved {
                    let archives = fileSystem.showsArchives(of: url) ? true : nil
                    probed.unmounted.append(SavedFile(name: name, url: url, archives: archives))
                }
                probed.unmountable.append(Unmountable(shown: shown, reason: reason, name: name.isEmpty ? shown : name,
                                                      keepSaved: keepSaved, wasSaved: saved.contains(url)))
                if directory.inode == Catalog.rootInode {
                    probed.catalog.setRootURL(nil)
                } else {
                    probed.catalog.removeNode(directory.inode)
                }
            }
        }
    }

    /// Adds a file to `catalog`, in the folders its name gives (`movies/a.mp4`, from a list file), with a warning
    /// if its name had to be cut to 255 bytes.
    func add(_ metadata: RemoteMetadata, as path: String?, to catalog: Catalog) {
        let parts = path?.split(separator: "/").map(String.init) ?? []
        let name = parts.last ?? path
        let folder = parts.count > 1 ? catalog.folder(Array(parts.dropLast())) : Catalog.rootInode
        let item = catalog.add(metadata, explicitName: name, parent: folder)
        if !metadata.sizeKnown {
            printError("rangefs: \(Redaction.redact(metadata.url)): the server sends no length; \(item.name) reads from "
                       + "start to end and shows its real size once it has been read to its end")
        }
        if let whole = EntryNaming.overlongName(explicit: name, metadata: metadata) {
            printError("rangefs: the name '\(whole.prefix(40))…' is \(whole.utf8.count) bytes, more than a file name "
                       + "can hold (255); it is shortened to '\(item.name.prefix(40))…' (\(item.name.utf8.count) bytes)")
        }
    }
}
