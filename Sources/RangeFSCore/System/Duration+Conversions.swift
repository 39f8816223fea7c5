import Dispatch

extension Duration {
    /// The duration in seconds, for arithmetic with clock readings and for showing it.
    public var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }

    /// The duration for Dispatch's timers (`asyncAfter`), to the nanosecond.
    public var dispatchInterval: DispatchTimeInterval {
        .nanoseconds(Int(components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000))
    }
}
