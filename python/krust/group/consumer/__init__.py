"""KIP-848's consumer group type: members reconciled towards a broker-computed assignment."""
