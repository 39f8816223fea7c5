// What the kernel is told to forget, and the one queue it is told from (issue 39).
//
// The kernel keeps names, attributes and pages of the mount. When the core learns that one of them is wrong (a
// file left the mount, a listing changed a file, an entry opened and its cached bytes start changing, a remote
// change or a digest mismatch made its pages wrong), it tells the kernel through a `KernelNotifier`: the FUSE
// adapter's sends FUSE notifications, the core tests' records them. Every such notice goes through
// `KernelInvalidations`, which owns the one queue they are sent from: off the thread that found the change, which
// may hold the directory or inode the kernel then waits for, or be the READ whose reply a page invalidation waits
// for. One serial queue keeps the notices in the order the core made them.

import Dispatch
import RangeFSSystem

/// Tells the kernel to drop what it caches of the mount. Its calls may block (a page invalidation waits for pages
/// that a READ in flight holds), so the core makes them only from `KernelInvalidations`' queue.
package protocol KernelNotifier: Sendable {
    /// The kernel forgets the name `name` in directory `parent`.
    func forgetName(_ name: String, in parent: UInt64)
    /// The kernel drops its cached pages of `inode` in `range`, and its attributes; `UInt64.max` as the upper
    /// bound means to the end of the file.
    func forgetPages(of inode: UInt64, in range: Range<UInt64>)
    /// The kernel drops its cached attributes of `inode` (not its pages).
    func forgetAttributes(of inode: UInt64)
}

/// The core's one way to the kernel's caches: queues each notice for the notifier, in order.
final class KernelInvalidations: Sendable {
    private let notifier: any KernelNotifier
    private let queue = DispatchQueue(label: "rangefs.invalidate")
    /// The inodes whose size or date changed (a newer listing, a probe), with how many notices to drop their
    /// attributes are queued.
    private let changedAttributes = LockedBox<[UInt64: Int]>([:])

    init(_ notifier: any KernelNotifier) {
        self.notifier = notifier
    }

    /// The kernel forgets the name `name` in directory `parent`, soon.
    func forgetName(_ name: String, in parent: UInt64) {
        queue.async { [notifier] in notifier.forgetName(name, in: parent) }
    }

    /// The kernel drops its pages of `inode` in `range` (to the end of the file by default), soon.
    func forgetPages(of inode: UInt64, in range: Range<UInt64> = 0..<UInt64.max) {
        queue.async { [notifier] in notifier.forgetPages(of: inode, in: range) }
    }

    /// The kernel drops its pages of `inode` in `range` before this returns: for the revalidator, whose ESTALE
    /// replies must follow the invalidation. Only where no READ whose pages `range` covers waits behind the
    /// caller (the revalidator leaves those pages out, and queues a complete pass with `forgetPages`).
    func forgetPagesNow(of inode: UInt64, in range: Range<UInt64>) {
        notifier.forgetPages(of: inode, in: range)
    }

    /// The kernel drops its attributes of `inode` before this returns: for an open whose probe found another size
    /// than the kernel was given, so that no read of the handle is answered by the old size. Dropping attributes
    /// waits for no page and no request (the kernel takes no lock a FUSE request holds), so it may be sent from
    /// any thread, also while the kernel waits for the open's reply.
    func forgetAttributesNow(of inode: UInt64) {
        notifier.forgetAttributes(of: inode)
    }

    /// The kernel drops its attributes of each of `inodes`, soon.
    func forgetAttributes(of inodes: [UInt64]) {
        guard !inodes.isEmpty else { return }
        queue.async { [notifier] in for inode in inodes { notifier.forgetAttributes(of: inode) } }
    }

    /// What the kernel may hold of `inode` changed: a newer listing's size or date, or another size than it was
    /// given, found by a probe or a revalidation: the kernel drops its attributes soon, and an open of `inode` before that makes it
    /// drop them at once (`forgetChangedAttributesNow`).
    func attributesChanged(of inode: UInt64) {
        changedAttributes.withLock { $0[inode, default: 0] += 1 }
        queue.async { [self] in
            notifier.forgetAttributes(of: inode)
            changedAttributes.withLock { changed in
                changed[inode]! -= 1
                if changed[inode] == 0 { changed[inode] = nil }
            }
        }
    }

    /// The kernel drops its attributes of `inode` before this returns if they changed and the notice saying so is
    /// still queued: for an open, which must not answer while the kernel may still hold a size that a probe found
    /// wrong (the probe of a fetch ahead can end between the kernel's lookup and the open; its notice then came
    /// after the first read, which stopped at the listed size). The queued notice is sent too, later; a second
    /// one costs the kernel one more lookup of the attributes. Only a change does this: the notices of entries
    /// that opened (their cached bytes start changing) stay queued, so a cold file's open costs no GETATTR.
    func forgetChangedAttributesNow(of inode: UInt64) {
        guard changedAttributes.withLock({ $0[inode] != nil }) else { return }
        notifier.forgetAttributes(of: inode)
    }

    /// Returns once every notice queued before this call was sent (tests, and a mount's end).
    func flush() {
        queue.sync {}
    }
}

/// A notifier for a file system no kernel sees (`rangefs verify`, tests that do not look): it tells nobody.
package struct NoKernel: KernelNotifier {
    package init() {}
    package func forgetName(_ name: String, in parent: UInt64) {}
    package func forgetPages(of inode: UInt64, in range: Range<UInt64>) {}
    package func forgetAttributes(of inode: UInt64) {}
}
