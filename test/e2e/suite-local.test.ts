// The e2e suite in local mode: LOCAL_XDS_PATH (a file of xDS resources, edited to push) and
// CA_PROVIDER=local, no control plane at all. Two cases of the istiod suite do not apply here:
// restarting istiod mid-stream (there is no istiod; the xDS server is in the agent) and a CA outage
// during rotation (the CA is in the agent too).

import { localMode } from "./modes.ts";
import { defineSuite } from "./suite.ts";

defineSuite(localMode);
