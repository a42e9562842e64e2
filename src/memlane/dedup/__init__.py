"""Write-time deduplication: the decision pipeline and the near-identical guard."""
