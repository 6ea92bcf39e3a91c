// The e2e suite against a fake istiod + fake CA (cases shared with local mode, suite.ts). The
// istiod-only cases are in istiod.test.ts (istiod restarted mid-stream, CA request, SDS) and
// ca-outage.test.ts (CA outage during rotation).

import { istiodMode } from "./modes.ts";
import { defineSuite } from "./suite.ts";

defineSuite(istiodMode);
