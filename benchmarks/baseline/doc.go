// Package baseline is the comparison point of the benchmark suite: SuperEdge's
// edge-health daemon, rebuilt from the public write-ups of it (the seed documents
// in shared/reference) so that it runs in the same harness as edgequorum, on the
// same fake kubelets, against the same real kube-apiserver.
//
// It must stay a model of SuperEdge, not a better design: where SuperEdge is
// wasteful (every node sends its whole row to every peer, every node writes the
// annotation itself), the waste is the thing being measured. It imports nothing
// of edgequorum's protocol code.
//
// # What is implemented, from the documents
//
//   - Node list (SyncNodeList, every check period): the nodes without the master
//     label; when the kube-system ConfigMap edge-health-zone-config says
//     TaintZoneAdmission=true, only the nodes whose superedgehealth/topology-zone
//     label equals this node's (or this node alone when it has none). Nodes are
//     identified by their InternalIP, and the list includes the node itself.
//   - Checks (ExecuteCheck, every check period): every plugin runs against every
//     IP of the list, self included; a plugin scores 100×weight or 0; a node is
//     normal when the summed score is at least the score line. The local result is
//     stamped with the local time.
//   - Exchange (Commun, every communication period): the local row — the result
//     for every checked IP — is sent as JSON {SourceIP, CheckDetail, Hmac} with an
//     HTTP PUT to /result on every other node of the row, 16 at a time, with the
//     configured number of tries. The HMAC is HMAC-SHA256, hex, keyed with the
//     hmackey of the kube-system ConfigMap hmac-config, over the JSON of SourceIP
//     followed by the JSON of CheckDetail, and it is computed (with the JSON
//     encoding) once per destination, as the documents show. The receiver checks
//     the HMAC, stamps every entry with its own clock and replaces the sender's
//     whole row.
//   - Vote (every vote period): threshold = (number of checked IPs + 1) / 2 in
//     integer division, compared with ≥; only entries younger than the vote
//     timeout count; every row counts, including the node's own and the stale
//     row of a dead node. A checked IP enters the pros (cons) list each time its
//     running count is at or above the threshold, so a clear majority puts it
//     there several times, and each entry is handled — this duplication is in
//     SuperEdge's vote loop and shows up as repeated write attempts.
//   - Annotation: for pros, superedgehealth/node-health=true and removal of the
//     node.kubernetes.io/unreachable:NoExecute taint; for cons, =false. The node
//     object is the copy held by the node list (so up to one check period old)
//     and it is written with Update, 16 at a time, only when something differs.
//     Every node does this for every node: there is no leader.
//   - Defaults: check 10 s, communication 60 s (timeout 2 s, 1 try), vote 10 s,
//     vote timeout 60 s, score line 100, server port 51005; the Kubernetes client
//     keeps client-go's default rate limit (5 QPS, burst 10).
//
// # Where we had to choose
//
//   - Check plugin: the ping plugin (TCP connect to the kubelet port, timeout 5 s,
//     3 tries, weight 1). SuperEdge's DaemonSet enables the kubelet-auth plugin
//     (HTTPS to :10250) instead; a dead node fails both the same way, and the fake
//     kubelets answer TLS inside the benchmark process, so an HTTPS request per
//     probe would charge the harness rather than the baseline. The documents'
//     ping loop shadows its error variable and so never fails; we implement what
//     it evidently means (fail when every try failed).
//   - The receive handler answers "Received!" after the HMAC check rather than
//     before it, so a bad HMAC gets a real 403.
//   - Bytes are counted on the exchange connections only (both directions, HTTP
//     headers included), as edgequorum's are on its zone port; the TCP connect of
//     the ping plugin carries no payload and is not counted, which flatters the
//     baseline slightly.
//   - Timings are flags, so the suite runs the baseline twice: with edgequorum's
//     probe cadence (check 2 s, exchange 2 s, vote 1 s, vote timeout 10 s) so the
//     comparison is about the protocol, and with SuperEdge's defaults above.
package baseline
