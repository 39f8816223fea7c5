import Foundation
import Glibc
import RangeFSTestSupport
import XCTest

/// Issue 16's background fill that tells a scan from a use, with the default options: a media prober reads a
/// movie's header and index and the fill leaves the rest alone; a copy or a sequential read completes the file.
final class FillPolicyTests: MountTestCase {
    /// A movie of about 112 MiB with its index (moov) at the end, made once: 10 s encoded, then looped 8 times.
    static var movieDigest: String?

    func serveMovie(_ name: String) throws -> (size: Int, digest: String) {
        let movie = origin.path(name)
        if FileManager.default.fileExists(atPath: movie), let digest = Self.movieDigest {
            return (try FileManager.default.attributesOfItem(atPath: movie)[.size] as! Int, digest)
        }
        let short = scratch.path + "/short.mp4"
        let encoded = try Shell.run("/usr/bin/ffmpeg", [
            "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=25", "-f", "lavfi",
            "-i", "sine=frequency=440:sample_rate=44100", "-t", "10", "-c:v", "mpeg4", "-q:v", "2", "-c:a", "aac", short,
        ], timeout: 300)
        XCTAssertEqual(encoded.status, 0, encoded.stderr)
        let looped = try Shell.run("/usr/bin/ffmpeg", ["-v", "error", "-y", "-stream_loop", "7", "-i", short,
                                                        "-c", "copy", movie], timeout: 300)
        XCTAssertEqual(looped.status, 0, looped.stderr)
        let size = try FileManager.default.attributesOfItem(atPath: movie)[.size] as! Int
        XCTAssertGreaterThan(size, 100 << 20)
        Self.movieDigest = try Shell.sha256(of: movie)
        return (size, Self.movieDigest!)
    }

    func state(_ path: String) throws -> String {
        try Shell.run("/usr/bin/getfattr", ["--only-values", "-n", "user.rangefs.state", path]).stdout
    }

    // ffprobe of a 100+ MiB movie fetches at most 8 MiB, counted after the fill would have had 10 s to run.
    func testAProbeOfAMovieDoesNotDownloadIt() throws {
        let movie = try serveMovie("probed.mp4")
        try mount([origin.url("probed.mp4")])
        origin.clearAccessLog()
        let probe = try Shell.run("/usr/bin/ffprobe", ["-v", "error", "-show_entries", "stream=codec_name,duration",
                                                       "-of", "csv=p=0", mountpoint + "/probed.mp4"])
        XCTAssertEqual(probe.status, 0, probe.stderr)
        XCTAssertTrue(probe.stdout.contains("mpeg4"), probe.stdout)
        sleep(10)
        let fetched = bytesFetched("/probed.mp4")
        XCTAssertLessThanOrEqual(fetched, 8 << 20, "ffprobe of a \(movie.size)-byte movie made the origin send \(fetched)")
    }

    // A sequential read that stops at 30% and closes the file gets the file completed in the background, and a
    // copy gets its copy: both with the same defaults.
    func testASequentialReadOf30PercentAndACopyGetTheirFilesCompleted() throws {
        let movie = try serveMovie("played.mp4")
        try mount(["played.mp4=" + origin.url("played.mp4"), "copied.mp4=" + origin.url("played.mp4?copy")])
        let played = mountpoint + "/played.mp4"
        let megabytes = (movie.size * 3 / 10) >> 20
        let read = try Shell.run("/bin/dd", ["if=" + played, "of=/dev/null", "bs=1M", "count=\(megabytes)"])
        XCTAssertEqual(read.status, 0, read.stderr)
        let deadline = Date().addingTimeInterval(60)
        while try state(played) != "complete", Date() < deadline { usleep(200_000) }
        XCTAssertEqual(try state(played), "complete", "a file read sequentially for 30% is completed after close")

        let copy = scratch.path + "/copy.mp4"
        XCTAssertEqual(try Shell.run("/bin/cp", [mountpoint + "/copied.mp4", copy]).status, 0)
        XCTAssertEqual(try Shell.sha256(of: copy), movie.digest)
        XCTAssertEqual(try state(mountpoint + "/copied.mp4"), "complete")
        XCTAssertEqual(try Shell.sha256(of: played), movie.digest)
    }
}
