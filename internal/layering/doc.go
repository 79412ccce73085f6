// Package layering holds no code: its test checks that the packages keep the
// dependency rules DESIGN.md states (which package may import which), so a
// change that breaks one fails `make test` instead of going unnoticed.
package layering
