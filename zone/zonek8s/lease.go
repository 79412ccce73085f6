package zonek8s

import (
	"strconv"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"

	"github.com/edgequorum/edgequorum/zone"
)

// ZoneLabel marks edgequorum's Leases with their zone: the webhook selects
// zone Leases by it and reads the zone a Lease speaks for from it.
const ZoneLabel = "edgequorum.io/zone"

// LeaseClaimOf reads the claim a zone Lease states, for its holder to sign and
// the webhook to check, both from this one reading. It reads what is there;
// whether that is a valid claim (a holder, a positive duration) is the
// reader's to judge.
func LeaseClaimOf(l *coordinationv1.Lease) zone.LeaseClaim {
	c := zone.LeaseClaim{
		Zone:            l.Labels[ZoneLabel],
		Holder:          ptr.Deref(l.Spec.HolderIdentity, ""),
		DurationSeconds: ptr.Deref(l.Spec.LeaseDurationSeconds, 0),
		Endorses:        l.Annotations[zone.LeaseEndorsesAnnotation],
	}
	c.Term, _ = strconv.ParseUint(l.Annotations[zone.LeaseTermAnnotation], 10, 64)
	if l.Spec.RenewTime != nil {
		c.Renewed = l.Spec.RenewTime.Time
	}
	// A level too new to read is still the level it says; the reader
	// refuses the Lease for it.
	c.Format, _ = zone.ParseFormatLevel(l.Annotations[zone.LeaseFormatAnnotation])
	return c
}
