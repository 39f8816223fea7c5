// The FUSE adapter's side of `KernelNotifier` (RangeFSFileSystem/KernelNotifier.swift): the core's notices,
// sent as FUSE notifications on the mounted session.
//
// The notifier is made before the file system (which takes it at its birth) and so before the session exists:
// the mount attaches the session once the kernel initialised it, and detaches it before the session is destroyed.
// Notices with no session attached are dropped, as the kernel holds nothing of a mount that is not there.

import CFUSE
import Glibc
import RangeFSFileSystem
import RangeFSSystem

/// Sends the core's invalidations to the kernel through the mounted session.
package final class FUSEKernelNotifier: KernelNotifier {
    private let session = LockedBox<UnsafeSendableSession?>(nil)

    package init() {}

    /// The session to notify from now on (once the kernel initialised it); nil once it is about to be destroyed.
    func attach(_ handle: UnsafeSendableSession?) {
        session.withLock { $0 = handle }
    }

    package func forgetName(_ name: String, in parent: UInt64) {
        guard let handle = session.withLock({ $0 }) else { return }
        _ = fuse_lowlevel_notify_inval_entry(handle.pointer, fuse_ino_t(parent), name, name.utf8.count)
    }

    package func forgetPages(of inode: UInt64, in range: Range<UInt64>) {
        // Not under the lock (none is, as before): it may wait for pages a READ in flight holds. The session
        // stays valid until `FUSEMount.finish`, which detaches it first.
        guard let handle = session.withLock({ $0 }) else { return }
        let length = range.upperBound == UInt64.max ? 0 : off_t(range.count)  // 0: to the end
        _ = fuse_lowlevel_notify_inval_inode(handle.pointer, fuse_ino_t(inode), off_t(range.lowerBound), length)
    }

    package func forgetAttributes(of inode: UInt64) {
        guard let handle = session.withLock({ $0 }) else { return }
        // An offset of -1 drops the attributes only, not the pages.
        _ = fuse_lowlevel_notify_inval_inode(handle.pointer, fuse_ino_t(inode), -1, 0)
    }
}
