"""Where is the rest: from one baseline trace, the fusions that would pay and what each would save.

plan_opportunities(summary) -> Plan (ranked opportunities, predicted step); `python -m analyzer opportunities`.
"""

from analyzer.opportunities.predict import Opportunity, Plan, plan_opportunities

__all__ = ["Opportunity", "Plan", "plan_opportunities"]
