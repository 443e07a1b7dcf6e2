/// Runs work for one key (an issuer) one at a time, in the order it arrives; work for other
/// keys runs beside it.
actor IssuerTurns {
    private var tails: [String: Task<Void, Never>] = [:]

    func run<T: Sendable>(_ key: String, _ work: @escaping @Sendable () async throws(BrokerError) -> T) async throws(BrokerError) -> T {
        let previous = tails[key]
        let turn = Task { () -> Result<T, BrokerError> in
            await previous?.value
            do throws(BrokerError) {
                return .success(try await work())
            } catch {
                return .failure(error)
            }
        }
        tails[key] = Task { _ = await turn.value }
        let result = await turn.value
        return try result.get()
    }
}
