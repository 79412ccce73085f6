// Package zonekeys owns a zone's shared HMAC keys: the key file's format, the
// Ring that signs with the first key and verifies with every key (and, for a
// grace period, with keys just dropped), and the Watcher that reloads the
// file while the agent runs so that keys rotate without a restart.
//
// It holds keys and answers "which bytes does this id mean"; it must not
// decide what a MAC covers or whom to trust — the zone port and the intake
// do. It must never log or export key bytes: metrics name key ids only. It
// imports no Kubernetes beyond the clock interface its tests drive.
package zonekeys
